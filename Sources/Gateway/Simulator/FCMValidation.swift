import Foundation
import NIOCore
import _CryptoExtras

/// A message the simulator accepted on its FCM side.
public struct AcceptedFCMMessage: Sendable, Codable, Equatable {
    /// The id FCM gives it: `projects/{project}/messages/{n}`.
    public var name: String
    public var project: String
    /// The registration token or installation id it was sent to (`fid` says which).
    public var token: String
    /// Sent to a Firebase Installation ID (`message.fid`) rather than a registration token.
    public var fid: Bool
    public var title: String?
    public var body: String?
    public var collapseKey: String?
    public var ttl: String?
    public var priority: String?
    public var data: [String: String]
    public var receivedAt: Date
}

/// A service account the simulator's token endpoint knows: its project and the public key its assertions verify
/// against.
public struct FCMSimulatedAccount: Sendable {
    public var projectID: String
    public var publicKey: _RSA.Signing.PublicKey

    public init(projectID: String, publicKey: _RSA.Signing.PublicKey) {
        self.projectID = projectID
        self.publicKey = publicKey
    }
}

/// An access token the simulator's token endpoint issued.
struct IssuedAccessToken: Sendable {
    var account: String
    var project: String
    var expiresAt: Date
}

/// FCM's refusal of a request, as Google's APIs write it: an HTTP status, a `google.rpc` status, FCM's own error
/// code, and, for a bad token or installation id, a field violation on `message.token` or `message.fid`.
struct FCMRefusal: Error, Equatable {
    var status: Int
    var rpcStatus: String
    var errorCode: String?
    var message: String
    /// The device field a violation is about: `message.token` or `message.fid`.
    var deviceField: String?

    var tokenField: Bool { deviceField != nil }

    static func invalid(_ message: String, field: String? = nil) -> FCMRefusal {
        FCMRefusal(
            status: 400,
            rpcStatus: "INVALID_ARGUMENT",
            errorCode: "INVALID_ARGUMENT",
            message: message,
            deviceField: field
        )
    }

    var body: ByteBuffer {
        var details: [[String: Any]] = []
        if let errorCode {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode])
        }
        if let deviceField {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [["field": deviceField, "description": message]],
            ])
        }
        var error: [String: Any] = ["code": status, "message": message, "status": rpcStatus]
        if !details.isEmpty { error["details"] = details }
        let data = (try? JSONSerialization.data(withJSONObject: ["error": error], options: [.sortedKeys])) ?? Data()
        return ByteBuffer(bytes: data)
    }
}

/// FCM HTTP v1's checks, in the order its answers imply, and its OAuth2 token endpoint's. Pure: no I/O, no clock of
/// its own.
struct FCMValidation {
    /// Data keys FCM refuses (its own, and the reserved prefixes).
    static let reservedDataKeys: Set<String> = ["from", "message_type", "notification", "collapse_key"]
    /// FCM's limit on a message's payload.
    static let maximumMessageBytes = 4096
    /// The longest `android.ttl` FCM takes: 28 days.
    static let maximumTTLSeconds = 2_419_200

    var now: Date

    // MARK: The token endpoint

    struct TokenRequestFailure: Error, Equatable {
        var status: Int
        var error: String
        var description: String

        var body: ByteBuffer {
            let data =
                (try? JSONSerialization.data(
                    withJSONObject: ["error": error, "error_description": description],
                    options: [.sortedKeys]
                )) ?? Data()
            return ByteBuffer(bytes: data)
        }
    }

    /// A JWT-bearer grant (RFC 7523): the assertion must be signed by a known account's key, for the messaging
    /// scope, to a token endpoint, current and at most an hour long. Returns the account's address.
    func tokenRequest(
        form body: Data,
        accounts: [String: FCMSimulatedAccount]
    ) -> Result<String, TokenRequestFailure> {
        func refuse(_ description: String, _ error: String = "invalid_grant") -> Result<String, TokenRequestFailure> {
            .failure(TokenRequestFailure(status: 400, error: error, description: description))
        }
        var components = URLComponents()
        components.percentEncodedQuery = String(decoding: body, as: UTF8.self)
        let fields = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { first, _ in first }
        )
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return refuse("grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer", "unsupported_grant_type")
        }
        guard let assertion = fields["assertion"], !assertion.isEmpty else {
            return refuse("the request has no assertion", "invalid_request")
        }
        guard let issuer = FCMAssertion.claimedIssuer(assertion), let account = accounts[issuer] else {
            return refuse("Invalid JWT: the issuer is not a known service account")
        }
        guard let claims = FCMAssertion.verify(assertion, key: account.publicKey) else {
            return refuse("Invalid JWT Signature.")
        }
        guard claims.scope.split(separator: " ").contains(Substring(FCMServiceAccount.messagingScope)) else {
            return refuse("Invalid JWT: the scope does not include firebase.messaging", "invalid_scope")
        }
        guard claims.audience.hasSuffix("/token") else {
            return refuse("Invalid JWT: the audience is not a token endpoint")
        }
        guard claims.issuedAt <= now + 300, claims.expiresAt > now,
            claims.expiresAt.timeIntervalSince(claims.issuedAt) <= 3600
        else {
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        return .success(issuer)
    }

    // MARK: messages:send

    /// The project a `messages:send` path names.
    static func project(ofPath path: String?) -> String? {
        guard let path, path.hasPrefix("/v1/projects/"), path.hasSuffix("/messages:send") else { return nil }
        let project = path.dropFirst("/v1/projects/".count).dropLast("/messages:send".count)
        return project.isEmpty || project.contains("/") ? nil : String(project)
    }

    /// Checks one request: its credential (issued, current, for this project), then the message as FCM does.
    /// `tokenState` says what the simulator knows of a device token.
    func message(
        method: String?,
        path: String?,
        authorization: String?,
        body: Data,
        issued: (String) -> IssuedAccessToken?,
        tokenState: (String) -> SimulatedTokenState
    ) -> Result<AcceptedFCMMessage, FCMRefusal> {
        guard method == "POST", let project = Self.project(ofPath: path) else {
            return .failure(FCMRefusal(status: 404, rpcStatus: "NOT_FOUND", errorCode: nil, message: "Not Found"))
        }
        guard let authorization, let bearer = APNsSimulator.bearerToken(authorization), let token = issued(bearer),
            token.expiresAt > now
        else {
            return .failure(
                FCMRefusal(
                    status: 401,
                    rpcStatus: "UNAUTHENTICATED",
                    errorCode: nil,
                    message: "Request had invalid authentication credentials. Expected OAuth 2 access token."
                )
            )
        }
        guard token.project == project else {
            return .failure(
                FCMRefusal(
                    status: 403,
                    rpcStatus: "PERMISSION_DENIED",
                    errorCode: nil,
                    message: "Permission 'cloudmessaging.messages.create' denied on resource"
                )
            )
        }
        guard let root = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let message = root["message"] as? [String: Any]
        else { return .failure(.invalid("Invalid JSON payload received: the body must be {\"message\": {...}}")) }
        let targets = ["token", "fid", "topic", "condition"].filter { message[$0] != nil }
        guard targets == ["token"] || targets == ["fid"] else {
            return .failure(
                .invalid(
                    "Exactly one of token, fid, topic or condition must be given; this simulator takes token or fid"
                )
            )
        }
        let field = "message." + targets[0]
        let refusedDevice =
            targets == ["fid"]
            ? "The installation id is not a valid Firebase Installation ID"
            : "The registration token is not a valid FCM registration token"
        guard let device = message[targets[0]] as? String, (1...4096).contains(device.utf8.count),
            device.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }),
            targets == ["token"] || FCMMessage.isInstallationID(device)
        else { return .failure(.invalid(refusedDevice, field: field)) }
        if let messageBytes = try? JSONSerialization.data(withJSONObject: message),
            messageBytes.count > Self.maximumMessageBytes
        {
            return .failure(.invalid("Message is too big: at most \(Self.maximumMessageBytes) bytes"))
        }
        let notification = message["notification"] as? [String: Any]
        if message["notification"] != nil, notification == nil {
            return .failure(.invalid("notification must be an object"))
        }
        for key in ["title", "body"] where notification?[key] != nil && !(notification?[key] is String) {
            return .failure(.invalid("notification.\(key) must be a string"))
        }
        var data: [String: String] = [:]
        if let given = message["data"] {
            guard let object = given as? [String: Any] else { return .failure(.invalid("data must be a map")) }
            for (key, value) in object {
                guard let text = value as? String else {
                    return .failure(.invalid("Invalid value at 'message.data[\(key)].value' (TYPE_STRING)"))
                }
                guard !Self.reservedDataKeys.contains(key), !key.hasPrefix("google."), !key.hasPrefix("gcm.") else {
                    return .failure(.invalid("Invalid data payload key: \(key)"))
                }
                data[key] = text
            }
        }
        let android = message["android"] as? [String: Any]
        if message["android"] != nil, android == nil { return .failure(.invalid("android must be an object")) }
        let ttl = android?["ttl"]
        if let ttl {
            guard let text = ttl as? String, let seconds = Self.seconds(ttl: text),
                seconds <= Double(Self.maximumTTLSeconds)
            else { return .failure(.invalid("android.ttl must be a duration in seconds (\"3600s\"), at most 28 days")) }
        }
        let priority = android?["priority"]
        if let priority, !["NORMAL", "HIGH"].contains(priority as? String ?? "") {
            return .failure(.invalid("android.priority must be NORMAL or HIGH"))
        }
        let collapseKey = android?["collapse_key"]
        if let collapseKey, !(collapseKey is String) {
            return .failure(.invalid("android.collapse_key must be a string"))
        }
        switch tokenState(device) {
        case .valid: break
        case .unregistered(let since) where since <= now:
            return .failure(
                FCMRefusal(
                    status: 404,
                    rpcStatus: "NOT_FOUND",
                    errorCode: "UNREGISTERED",
                    message: "Requested entity was not found."
                )
            )
        case .unregistered: break
        case .otherTopic:
            return .failure(
                FCMRefusal(
                    status: 403,
                    rpcStatus: "PERMISSION_DENIED",
                    errorCode: "SENDER_ID_MISMATCH",
                    message: "SenderId mismatch"
                )
            )
        case .otherEnvironment:
            return .failure(.invalid(refusedDevice, field: field))
        }
        return .success(
            AcceptedFCMMessage(
                name: "",
                project: project,
                token: device,
                fid: targets == ["fid"],
                title: notification?["title"] as? String,
                body: notification?["body"] as? String,
                collapseKey: collapseKey as? String,
                ttl: ttl as? String,
                priority: priority as? String,
                data: data,
                receivedAt: now
            )
        )
    }

    /// A protobuf Duration in JSON ("3.5s"): seconds with up to nine fractional digits.
    static func seconds(ttl: String) -> Double? {
        guard ttl.hasSuffix("s") else { return nil }
        let number = ttl.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII),
            parts[0].allSatisfy(\.isNumber),
            parts.count == 1 || ((1...9).contains(parts[1].count) && parts[1].allSatisfy { $0.isASCII && $0.isNumber })
        else { return nil }
        return Double(number)
    }
}
