import Foundation

/// A SCIM filter (RFC 7644, section 3.4.2.2) as a directory sends it to list users: attribute paths compared with
/// `eq`, `ne`, `co`, `sw`, `ew`, `gt`, `ge`, `lt`, `le` or tested with `pr`, joined by `and`, `or` and `not (...)`,
/// with parentheses, and multi-valued attributes filtered in brackets (`emails[type eq "work"]`), including the
/// form Microsoft Entra ID and Okta send with a sub-attribute after the bracket (`emails[type eq "work"].value eq
/// "ada@acme.example"`). Attribute names and operators are case-insensitive; so are string comparisons, except of
/// `id` and `externalId` (caseExact in RFC 7643's schema).
public indirect enum SCIMFilter: Sendable, Equatable {
    case compare(path: [String], op: Operator, value: Value)
    case present(path: [String])
    /// `attribute[filter]`, optionally followed by a comparison of one sub-attribute of the matching values.
    case valuePath(attribute: String, filter: SCIMFilter, then: SCIMFilter?)
    case and(SCIMFilter, SCIMFilter)
    case or(SCIMFilter, SCIMFilter)
    case not(SCIMFilter)

    public enum Operator: String, Sendable, CaseIterable {
        case eq, ne, co, sw, ew, gt, ge, lt, le
    }

    public enum Value: Sendable, Equatable {
        case string(String)
        case number(Double)
        case bool(Bool)
        case null
    }

    /// The longest filter parsed, and the deepest nesting: a directory's filters are one or two comparisons.
    public static let maximumLength = 2048
    public static let maximumDepth = 16

    public init(parsing text: String) throws(SCIMFilterError) {
        guard text.utf8.count <= Self.maximumLength else {
            throw SCIMFilterError("the filter is longer than \(Self.maximumLength) characters")
        }
        var parser = SCIMFilterParser(tokens: try SCIMFilterParser.tokenize(text))
        self = try parser.parseFilter(depth: 0)
        guard parser.atEnd else { throw SCIMFilterError("unexpected \(parser.describeNext()) after the filter") }
    }

    /// The single equality a directory asks most (`userName eq`, `externalId eq`, `emails[type eq "work"].value eq`,
    /// `emails.value eq`), for a store to answer with an index rather than a scan; nil for anything else.
    public var lookup: SCIMLookup? {
        switch self {
        case .compare(let path, .eq, .string(let value)):
            switch path.map({ $0.lowercased() }) {
            case ["username"]: return .userName(value)
            case ["externalid"]: return .externalID(value)
            case ["emails", "value"], ["emails"]: return .email(value, type: nil)
            default: return nil
            }
        case .valuePath(
            let attribute,
            .compare(let inner, .eq, .string(let type)),
            .compare(let sub, .eq, .string(let value))
        )
        where attribute.lowercased() == "emails" && inner.map({ $0.lowercased() }) == ["type"]
            && sub.map({ $0.lowercased() }) == ["value"]:
            return .email(value, type: type)
        default:
            return nil
        }
    }
}

/// An equality a store answers directly.
public enum SCIMLookup: Sendable, Equatable {
    case userName(String)
    case externalID(String)
    case email(String, type: String?)
}

/// Why a filter was refused: answered 400 with `scimType` `invalidFilter`.
public struct SCIMFilterError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
