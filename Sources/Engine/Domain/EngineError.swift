/// The error every Engine component throws. Codes can grow; descriptions never contain secrets.
public struct EngineError: Error, Sendable, CustomStringConvertible, Equatable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        public static let invalidInput = Code(name: "invalid-input")
        public static let notFound = Code(name: "not-found")
        public static let unknownTenant = Code(name: "unknown-tenant")
        public static let conflict = Code(name: "conflict")
        /// The caller is known but may not do this (a tenant admin asking for an operator's action, a suspended tenant).
        public static let forbidden = Code(name: "forbidden")
        public static let storage = Code(name: "storage")
        /// A body or file larger than its bound (a media file, a tenant's media quota).
        public static let tooLarge = Code(name: "too-large")
        /// A body of a type the route does not take (a media file whose `Content-Type` is not its name's).
        public static let unsupportedType = Code(name: "unsupported-type")
        public var description: String { name }
    }

    public let code: Code
    /// A message safe to show to a client and to log: no passwords, tokens or SQL.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
