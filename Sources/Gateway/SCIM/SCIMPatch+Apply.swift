import Foundation

/// A PATCH operation's target: an attribute path, optionally a filter on a multi-valued attribute's values and a
/// sub-attribute of the matching ones (`emails[type eq "work"].value`).
public struct SCIMPatchPath: Sendable, Equatable {
    public var attribute: [String]
    public var filter: SCIMFilter?
    public var subAttribute: String?

    /// The name the value is for (the sub-attribute, or the path's last attribute).
    var target: String { subAttribute ?? attribute.last ?? "" }

    public init(parsing text: String) throws(SCIMError) {
        do throws(SCIMFilterError) {
            var parser = SCIMFilterParser(tokens: try SCIMFilterParser.tokenize(text))
            attribute = try parser.parsePath()
            if parser.next == .openBracket {
                parser.position += 1
                filter = try parser.parseFilter(depth: 1)
                try parser.expect(.closeBracket, "']'")
                if case .word(let word) = parser.next, word.hasPrefix("."), word.count > 1 {
                    parser.position += 1
                    subAttribute = String(word.dropFirst())
                }
            }
            guard parser.atEnd else { throw SCIMFilterError("unexpected \(parser.describeNext()) in the path") }
        } catch {
            throw SCIMError(.invalidPath, "path \(text.prefix(200)): \(error.description)")
        }
    }
}

extension SCIMPatch {
    /// Sets, adds to or removes the attribute at `path` (objects on the way created for add and replace).
    static func set(_ op: Op, _ path: [String], _ value: Any?, in object: inout [String: Any]) throws(SCIMError) {
        let key = object.keys.first { $0.lowercased() == path[0].lowercased() } ?? path[0]
        if path.count > 1 {
            if op == .remove, object[key] == nil { return }
            if var items = object[key] as? [Any] {
                // A sub-attribute of a multi-valued attribute without a filter: every value's.
                for index in items.indices {
                    guard var element = items[index] as? [String: Any] else { continue }
                    try set(op, Array(path.dropFirst()), value, in: &element)
                    items[index] = element
                }
                object[key] = items
                return
            }
            var child = object[key] as? [String: Any] ?? [:]
            try set(op, Array(path.dropFirst()), value, in: &child)
            object[key] = child
            return
        }
        switch op {
        case .remove:
            // Entra ID's members removal without its flag: the values to remove in `value`.
            if let values = value as? [Any], let items = object[key] as? [Any] {
                let gone = Set(values.compactMap { ($0 as? [String: Any])?["value"] as? String })
                object[key] = items.filter { item in
                    guard let id = (item as? [String: Any])?["value"] as? String else { return true }
                    return !gone.contains(id)
                }
            } else {
                object[key] = nil
            }
        case .add:
            if let items = object[key] as? [Any] {
                let added = (value as? [Any]) ?? [value as Any]
                object[key] = items + added.filter { new in !items.contains { same($0, new) } }
            } else if let existing = object[key] as? [String: Any], let members = value as? [String: Any] {
                object[key] = existing.merging(members) { $1 }
            } else {
                object[key] = value
            }
        case .replace:
            if let existing = object[key] as? [String: Any], let members = value as? [String: Any] {
                object[key] = existing.merging(members) { $1 }
            } else {
                object[key] = value
            }
        }
    }

    /// An operation on the values of a multi-valued attribute that match `filter`. With no match, add and replace
    /// create a value from the filter's equalities (Entra ID sets a first work address this way); remove does
    /// nothing (the value is already gone).
    static func applyFiltered(
        _ op: Op,
        _ path: SCIMPatchPath,
        _ filter: SCIMFilter,
        _ value: Any?,
        to resource: inout [String: Any]
    ) throws(SCIMError) {
        var container = resource
        var keys = path.attribute
        let last = keys.removeLast()
        // The multi-valued attribute may sit under an extension's URN.
        var parents: [[String: Any]] = []
        for key in keys {
            parents.append(container)
            container = SCIMFilter.member(key, of: container) as? [String: Any] ?? [:]
        }
        let name = container.keys.first { $0.lowercased() == last.lowercased() } ?? last
        var items = (container[name] as? [Any]) ?? []
        var matched = false
        var kept: [Any] = []
        for item in items {
            guard var element = item as? [String: Any], filter.matches(element) else {
                kept.append(item)
                continue
            }
            matched = true
            switch (op, path.subAttribute) {
            case (.remove, nil): continue
            case (.remove, let sub?): element[sub] = nil
            case (_, let sub?): element[sub] = value
            case (_, nil):
                guard let members = value as? [String: Any] else {
                    throw SCIMError(.invalidValue, "a filtered \(op.rawValue) without a sub-attribute needs an object")
                }
                element.merge(members) { $1 }
            }
            kept.append(element)
        }
        items = kept
        if !matched, op != .remove {
            var element = equalities(of: filter)
            if let sub = path.subAttribute {
                element[sub] = value
            } else if let members = value as? [String: Any] {
                element.merge(members) { $1 }
            }
            items.append(element)
        }
        container[name] = items
        // Written back up through the extension's object, if any.
        for key in keys.reversed() {
            var parent = parents.removeLast()
            let parentKey = parent.keys.first { $0.lowercased() == key.lowercased() } ?? key
            parent[parentKey] = container
            container = parent
        }
        resource = container
    }

    /// The `attribute eq value` parts of a filter joined by `and`, as the members of a new value.
    static func equalities(of filter: SCIMFilter) -> [String: Any] {
        switch filter {
        case .compare(let path, .eq, let value) where path.count == 1:
            switch value {
            case .string(let text): return [path[0]: text]
            case .bool(let bool): return [path[0]: bool]
            case .number(let number): return [path[0]: number]
            case .null: return [:]
            }
        case .and(let left, let right): return equalities(of: left).merging(equalities(of: right)) { $1 }
        default: return [:]
        }
    }

    /// Whether two JSON values are the same (so that adding a value already there adds nothing).
    static func same(_ left: Any, _ right: Any) -> Bool {
        guard let a = try? JSONSerialization.data(withJSONObject: [left], options: [.sortedKeys]),
            let b = try? JSONSerialization.data(withJSONObject: [right], options: [.sortedKeys])
        else { return false }
        return a == b
    }
}
