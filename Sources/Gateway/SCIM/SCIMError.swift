import Foundation

/// A SCIM request refused (RFC 7644, section 3.12): an HTTP status, the `scimType` where the RFC names one, and a
/// detail that says what was wrong without echoing secrets.
public struct SCIMError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case invalidFilter, tooMany, uniqueness, mutability, invalidSyntax, invalidPath, noTarget, invalidValue
        case invalidVers, sensitive
    }

    public var status: Int
    public var scimType: Kind?
    public var detail: String

    public init(status: Int = 400, _ scimType: Kind?, _ detail: String) {
        self.status = status
        self.scimType = scimType
        self.detail = detail
    }

    public var description: String { "\(status) \(scimType?.rawValue ?? "-"): \(detail)" }

    /// The error body: `urn:ietf:params:scim:api:messages:2.0:Error`, its status as a string, as the RFC writes it.
    public var body: [String: Any] {
        var body: [String: Any] = [
            "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"], "status": String(status), "detail": detail,
        ]
        if let scimType { body["scimType"] = scimType.rawValue }
        return body
    }
}
