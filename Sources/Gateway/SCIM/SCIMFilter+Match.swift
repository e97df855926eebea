import Foundation

extension SCIMFilter {
    /// Attributes compared case-sensitively (RFC 7643: `caseExact` true); every other string ignores case.
    static let caseExact: Set<String> = ["id", "externalid"]

    /// Whether a resource, as its SCIM JSON object, matches. A comparison holds when any of the attribute's values
    /// does (a multi-valued attribute of objects is compared by their `value`); `ne` holds when none is equal, so
    /// also when the attribute is absent.
    public func matches(_ resource: [String: Any]) -> Bool {
        switch self {
        case .and(let left, let right): return left.matches(resource) && right.matches(resource)
        case .or(let left, let right): return left.matches(resource) || right.matches(resource)
        case .not(let inner): return !inner.matches(resource)
        case .present(let path): return !Self.values(at: path, in: resource).isEmpty
        case .compare(let path, let op, let value):
            let exact = Self.caseExact.contains(path.last?.lowercased() ?? "")
            let values = Self.values(at: path, in: resource)
            if op == .ne { return !values.contains { Self.compare($0, .eq, value, caseExact: exact) } }
            if value == .null { return op == .eq && values.isEmpty }
            return values.contains { Self.compare($0, op, value, caseExact: exact) }
        case .valuePath(let attribute, let filter, let then):
            let elements = (Self.member(attribute, of: resource) as? [Any] ?? []).compactMap { $0 as? [String: Any] }
            return elements.contains { filter.matches($0) && (then?.matches($0) ?? true) }
        }
    }

    /// A member of a JSON object, its name compared without case.
    static func member(_ name: String, of object: [String: Any]) -> Any? {
        if let exact = object[name] { return exact }
        let lowered = name.lowercased()
        return object.first { $0.key.lowercased() == lowered }?.value
    }

    /// Every value at `path` (absent and null ones left out, arrays flattened; where the path ends on an array of
    /// objects, their `value`s).
    static func values(at path: [String], in resource: [String: Any]) -> [Any] {
        guard let first = path.first, let top = member(first, of: resource), !(top is NSNull) else { return [] }
        let items = (top as? [Any]) ?? [top]
        var result: [Any] = []
        for item in items {
            if path.count > 1 {
                if let object = item as? [String: Any] { result += values(at: Array(path.dropFirst()), in: object) }
            } else if let object = item as? [String: Any] {
                if let value = member("value", of: object), !(value is NSNull) { result.append(value) }
            } else if !(item is NSNull) {
                result.append(item)
            }
        }
        return result
    }

    static func compare(_ actual: Any, _ op: Operator, _ expected: Value, caseExact: Bool) -> Bool {
        switch expected {
        case .null:
            return false
        case .bool(let wanted):
            // JSON booleans, and the strings "True"/"False" Entra ID writes for them.
            let bool: Bool? = (actual as? Bool) ?? (actual as? String).flatMap { Bool($0.lowercased()) }
            guard let bool, op == .eq else { return false }
            return bool == wanted
        case .number(let wanted):
            guard let number = (actual as? NSNumber)?.doubleValue ?? (actual as? String).flatMap(Double.init) else {
                return false
            }
            switch op {
            case .eq: return number == wanted
            case .gt: return number > wanted
            case .ge: return number >= wanted
            case .lt: return number < wanted
            case .le: return number <= wanted
            case .ne, .co, .sw, .ew: return false
            }
        case .string(let wanted):
            guard let raw = actual as? String else { return false }
            let value = caseExact ? raw : raw.lowercased()
            let target = caseExact ? wanted : wanted.lowercased()
            switch op {
            case .eq: return value == target
            case .co: return value.contains(target)
            case .sw: return value.hasPrefix(target)
            case .ew: return value.hasSuffix(target)
            case .gt: return value > target
            case .ge: return value >= target
            case .lt: return value < target
            case .le: return value <= target
            case .ne: return value != target
            }
        }
    }
}
