import Crypto
import Foundation

/// What the simulator knows about a device token.
public enum SimulatedTokenState: Sendable, Equatable, Codable {
    case valid
    /// APNs learned at `since` that the token is no longer valid (answers 410 with that timestamp).
    case unregistered(since: Date)
    /// The token belongs to another app (DeviceTokenNotForTopic).
    case otherTopic
    /// The token is for the other environment (BadDeviceToken).
    case otherEnvironment
}

/// A push the simulator accepted.
public struct AcceptedPush: Sendable, Codable, Equatable {
    public var token: String
    public var topic: String
    public var pushType: String
    public var priority: Int
    public var expiration: Int?
    public var apnsID: String
    public var collapseID: String?
    public var payload: String
    public var receivedAt: Date
}

/// APNs' request validation, in the order Apple's reasons imply. Pure: no I/O, no clock of its own.
struct APNsValidation {
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets",
    ]

    struct Rejection: Error, Equatable {
        var status: Int
        var reason: String
        var timestamp: Date?
    }

    /// The parts of a request that validation reads.
    struct Input {
        var method: String?
        var path: String?
        var headers: (String) -> String?
        var body: Data
    }

    let allowedTopics: Set<String>?
    let keys: [String: P256.Signing.PublicKey]
    let tokenState: (String) -> SimulatedTokenState
    let now: Date

    /// Checks a request; returns the accepted push or the rejection APNs would send.
    /// `lastIssuedAt` is the newest `iat` seen for the token's key (for the 20-minute rule).
    func validate(
        _ input: Input,
        lastIssuedAt: (String) -> Date?
    ) -> Result<(AcceptedPush, ProviderJWT.Claims?), Rejection> {
        let apnsID = input.headers("apns-id")
        if let apnsID, UUID(uuidString: apnsID) == nil { return .failure(.init(status: 400, reason: "BadMessageId")) }
        guard input.method == "POST" else { return .failure(.init(status: 405, reason: "MethodNotAllowed")) }
        guard let topic = input.headers("apns-topic"), !topic.isEmpty else {
            return .failure(.init(status: 400, reason: "MissingTopic"))
        }
        if let allowedTopics, !allowedTopics.contains(topic) {
            return .failure(.init(status: 400, reason: "TopicDisallowed"))
        }
        let collapseID = input.headers("apns-collapse-id")
        if let collapseID, collapseID.utf8.count > 64 { return .failure(.init(status: 400, reason: "BadCollapseId")) }
        let priorityText = input.headers("apns-priority") ?? "10"
        guard let priority = Int(priorityText), [10, 5, 1].contains(priority) else {
            return .failure(.init(status: 400, reason: "BadPriority"))
        }
        let pushType = input.headers("apns-push-type") ?? "alert"
        guard Self.pushTypes.contains(pushType) else { return .failure(.init(status: 400, reason: "InvalidPushType")) }
        var expiration: Int?
        if let text = input.headers("apns-expiration") {
            guard let value = Int(text), value >= 0 else {
                return .failure(.init(status: 400, reason: "BadExpirationDate"))
            }
            expiration = value
        }
        guard let path = input.path, path.hasPrefix("/3/device/") else {
            return .failure(.init(status: 404, reason: "BadPath"))
        }
        let token = String(path.dropFirst("/3/device/".count))
        guard !token.isEmpty else { return .failure(.init(status: 400, reason: "MissingDeviceToken")) }
        guard token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
            return .failure(.init(status: 400, reason: "BadDeviceToken"))
        }
        switch tokenState(token.lowercased()) {
        case .valid: break
        case .unregistered(let since): return .failure(.init(status: 410, reason: "Unregistered", timestamp: since))
        case .otherTopic: return .failure(.init(status: 400, reason: "DeviceTokenNotForTopic"))
        case .otherEnvironment: return .failure(.init(status: 400, reason: "BadDeviceToken"))
        }
        var claims: ProviderJWT.Claims?
        if !keys.isEmpty {
            guard let authorization = input.headers("authorization") else {
                return .failure(.init(status: 403, reason: "MissingProviderToken"))
            }
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                return .failure(.init(status: 403, reason: "MissingProviderToken"))
            }
            do {
                let verified = try ProviderJWT.verify(String(parts[1])) { keys[$0] }
                if now.timeIntervalSince(verified.issuedAt) > 3600 {
                    return .failure(.init(status: 403, reason: "ExpiredProviderToken"))
                }
                if let last = lastIssuedAt(verified.keyID), verified.issuedAt > last,
                    verified.issuedAt.timeIntervalSince(last) < 20 * 60
                {
                    return .failure(.init(status: 429, reason: "TooManyProviderTokenUpdates"))
                }
                claims = verified
            } catch {
                return .failure(.init(status: 403, reason: error.reason))
            }
        }
        guard !input.body.isEmpty else { return .failure(.init(status: 400, reason: "PayloadEmpty")) }
        guard input.body.count <= (pushType == "voip" ? 5120 : 4096) else {
            return .failure(.init(status: 413, reason: "PayloadTooLarge"))
        }
        let push = AcceptedPush(
            token: token.lowercased(),
            topic: topic,
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            apnsID: apnsID?.lowercased() ?? UUID().uuidString.lowercased(),
            collapseID: collapseID,
            payload: String(decoding: input.body, as: UTF8.self),
            receivedAt: now
        )
        return .success((push, claims))
    }
}
