import Foundation

/// A SCIM PATCH request (RFC 7644, section 3.5.2), applied to a resource's SCIM JSON; the endpoint then reads the
/// result as it reads a PUT, so both share one set of rules. Accepts the forms Microsoft Entra ID sends with and
/// without its `aadOptscim062020` flag: capitalised `op` values, booleans as the strings `"True"` and `"False"`, a
/// `replace` or `add` without a path whose value's keys are paths (`"name.givenName"`, an extension's URN-qualified
/// attributes), and members removed by a value list (`"path": "members", "value": [{"value": "id"}]`) as well as by
/// a filter (`"path": "members[value eq \"id\"]"`).
/// Parsed and applied within one request: it holds JSON values (`Any`), so it is not `Sendable`.
public struct SCIMPatch {
    public enum Op: String, Sendable {
        case add, replace, remove
    }

    public struct Operation {
        public var op: Op
        public var path: SCIMPatchPath?
        /// The JSON value (absent for most removes).
        public var value: Any?
    }

    public static let schema = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
    public static let maximumOperations = 1000
    /// Attributes the service provider owns.
    static let readOnly: Set<String> = ["id", "meta", "schemas"]
    /// Attributes whose values are booleans (Entra ID writes them as strings without its flag).
    static let booleans: Set<String> = ["active", "primary"]

    public var operations: [Operation]

    /// A PATCH body as JSON.
    public init(json: Any) throws(SCIMError) {
        guard let body = json as? [String: Any] else {
            throw SCIMError(.invalidSyntax, "the body is not a JSON object")
        }
        let schemas = SCIMFilter.member("schemas", of: body) as? [String] ?? []
        guard schemas.contains(Self.schema) else {
            throw SCIMError(.invalidSyntax, "schemas must hold \(Self.schema)")
        }
        guard let list = SCIMFilter.member("Operations", of: body) as? [Any], !list.isEmpty else {
            throw SCIMError(.invalidSyntax, "Operations must be a non-empty array")
        }
        guard list.count <= Self.maximumOperations else {
            throw SCIMError(.invalidSyntax, "at most \(Self.maximumOperations) operations in one request")
        }
        var operations: [Operation] = []
        for (index, item) in list.enumerated() {
            guard let entry = item as? [String: Any], let name = SCIMFilter.member("op", of: entry) as? String,
                let op = Op(rawValue: name.lowercased())
            else {
                throw SCIMError(.invalidSyntax, "operation \(index): op must be add, replace or remove")
            }
            let path = try (SCIMFilter.member("path", of: entry) as? String).map { text throws(SCIMError) in
                try SCIMPatchPath(parsing: text)
            }
            let value = SCIMFilter.member("value", of: entry)
            if op != .remove, value == nil || value is NSNull {
                throw SCIMError(.invalidValue, "operation \(index): \(op.rawValue) needs a value")
            }
            if op == .remove, path == nil { throw SCIMError(.noTarget, "operation \(index): remove needs a path") }
            operations.append(Operation(op: op, path: path, value: value))
        }
        self.operations = operations
    }

    /// The resource after every operation, in order; nothing changes if one fails.
    public func apply(to resource: [String: Any]) throws(SCIMError) -> [String: Any] {
        var result = resource
        for operation in operations {
            if let path = operation.path {
                try Self.apply(operation.op, path, operation.value, to: &result)
            } else {
                // No path: the value is an object whose members are the paths to add or replace.
                guard let members = operation.value as? [String: Any] else {
                    throw SCIMError(.invalidValue, "\(operation.op.rawValue) without a path needs an object value")
                }
                for (key, value) in members.sorted(by: { $0.key < $1.key }) {
                    try Self.apply(operation.op, try SCIMPatchPath(parsing: key), value, to: &result)
                }
            }
        }
        return result
    }

    static func apply(
        _ op: Op,
        _ path: SCIMPatchPath,
        _ value: Any?,
        to resource: inout [String: Any]
    )
        throws(SCIMError)
    {
        guard let first = path.attribute.first, !readOnly.contains(first.lowercased()) else {
            throw SCIMError(.mutability, "\(path.attribute.joined(separator: ".")) is read-only")
        }
        let value = try value.map { v throws(SCIMError) in try normalized(v, name: path.target) }
        if let filter = path.filter {
            try applyFiltered(op, path, filter, value, to: &resource)
        } else {
            try set(op, path.attribute, value, in: &resource)
        }
    }

    /// Strings where booleans belong become booleans ("True", "false"); anything else there is refused.
    static func normalized(_ value: Any, name: String) throws(SCIMError) -> Any {
        if booleans.contains(name.lowercased()), let text = value as? String {
            guard let bool = Bool(text.lowercased()) else {
                throw SCIMError(.invalidValue, "\(name) must be true or false")
            }
            return bool
        }
        if let object = value as? [String: Any] {
            var result: [String: Any] = [:]
            for (key, member) in object { result[key] = try normalized(member, name: key) }
            return result
        }
        if let array = value as? [Any] {
            var result: [Any] = []
            for item in array { result.append(try normalized(item, name: name)) }
            return result
        }
        return value
    }
}
