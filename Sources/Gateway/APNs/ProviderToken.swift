import Crypto
import Engine
import Foundation
import Logging
import Synchronization

/// A team's APNs signing key (the `.p8` file) and its ids.
public struct APNsSigningIdentity: Sendable, Hashable {
    public var teamID: String
    public var keyID: String
    let key: P256.Signing.PrivateKey

    /// Reads the PEM text of a `.p8` file.
    public init(teamID: String, keyID: String, p8 pem: String) throws {
        self.init(teamID: teamID, keyID: keyID, key: try P256.Signing.PrivateKey(pemRepresentation: pem))
    }

    public init(teamID: String, keyID: String, key: P256.Signing.PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
    }

    public var publicKey: P256.Signing.PublicKey { key.publicKey }

    public static func == (lhs: APNsSigningIdentity, rhs: APNsSigningIdentity) -> Bool {
        lhs.teamID == rhs.teamID && lhs.keyID == rhs.keyID && lhs.key.rawRepresentation == rhs.key.rawRepresentation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(teamID)
        hasher.combine(keyID)
    }
}

/// ES256 JSON Web Tokens as APNs uses them: `{"alg":"ES256","kid"}` and `{"iss","iat"}`.
public enum ProviderJWT {
    public static func sign(_ identity: APNsSigningIdentity, issuedAt: Date) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(identity.keyID)"}"#
        let claims = #"{"iss":"\#(identity.teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#
        let input = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        let signature = try identity.key.signature(for: Data(input.utf8))
        return input + "." + base64URL(signature.rawRepresentation)
    }

    public struct Claims: Sendable, Equatable {
        public var keyID: String
        public var teamID: String
        public var issuedAt: Date
    }

    /// Parses and verifies a token against the public key registered for its `kid`; nil `key` means unknown.
    /// Throws the APNs reason string on failure.
    public static func verify(
        _ token: String,
        key: (String) -> P256.Signing.PublicKey?
    ) throws(ProviderJWTError) -> Claims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = decodeBase64URL(parts[0]), let claimsData = decodeBase64URL(parts[1]),
            let signatureData = decodeBase64URL(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any],
            header["alg"] as? String == "ES256", let keyID = header["kid"] as? String,
            let teamID = claims["iss"] as? String, let iat = claims["iat"] as? Int
        else { throw ProviderJWTError(reason: "InvalidProviderToken") }
        guard let publicKey = key(keyID) else { throw ProviderJWTError(reason: "InvalidProviderToken") }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
            publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { throw ProviderJWTError(reason: "InvalidProviderToken") }
        return Claims(keyID: keyID, teamID: teamID, issuedAt: Date(timeIntervalSince1970: TimeInterval(iat)))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decodeBase64URL(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

public struct ProviderJWTError: Error, Sendable, Equatable {
    public var reason: String
}

/// One provider token per identity, shared by all its connections and, through the store, by every node of the
/// deployment; renewed inside Apple's window.
///
/// Apple rejects tokens older than an hour and renewals more often than every 20 minutes (for a key, across
/// connections: the stricter reading). So a token is reused for `refreshAfter` (45 minutes by default); the node
/// that finds it stale first signs a new one and publishes it with a compare-and-set, and every other node takes
/// that one (a signed token that lost the race is never sent). A forced renewal (after ExpiredProviderToken or
/// InvalidProviderToken) first takes a newer token another node published, and is refused while the current
/// token is younger than 20 minutes. With no store (or while it fails) the token is kept in memory only.
public final class ProviderTokenCache: Sendable {
    public let identity: APNsSigningIdentity
    private let refreshAfter: TimeInterval
    private let minimumAge: TimeInterval = 20 * 60
    private let now: @Sendable () -> Date
    private let current = Mutex<SharedProviderToken?>(nil)
    private let store: (any ProviderTokenStore)?
    private let logger: Logger?

    /// - Parameter store: where the deployment's nodes share the token; nil keeps it in memory only.
    public init(
        identity: APNsSigningIdentity,
        refreshAfter: Duration = .seconds(45 * 60),
        store: (any ProviderTokenStore)? = nil,
        logger: Logger? = nil,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.identity = identity
        self.refreshAfter = TimeInterval(refreshAfter.components.seconds)
        self.now = now
        self.store = store
        self.logger = logger
    }

    /// The token to send now.
    public func token() async throws -> String {
        let now = self.now()
        if let cached = current.withLock({ $0 }), fresh(cached, at: now) { return cached.token }
        let shared = await sharedToken()
        if let shared, fresh(shared, at: now), signedByThisKey(shared) { return adopt(shared).token }
        return try await issue(at: now, replacing: shared).token
    }

    /// Renews after APNs called the token expired or invalid: takes a newer token another node has published, or
    /// publishes a new one. Returns false (keeping the token) when the current one is younger than 20 minutes and
    /// no other node has renewed it, since renewing then would earn TooManyProviderTokenUpdates.
    @discardableResult
    public func renew() async throws -> Bool {
        let now = self.now()
        let cached = current.withLock { $0 }
        let shared = await sharedToken()
        if let shared, shared != cached, shared.issuedAt > cached?.issuedAt ?? .distantPast, fresh(shared, at: now),
            signedByThisKey(shared)
        {
            adopt(shared)
            return true
        }
        if let cached, now.timeIntervalSince(cached.issuedAt) < minimumAge { return false }
        return try await issue(at: now, replacing: shared) != cached
    }

    /// When the current token was issued (for inspection).
    public var issuedAt: Date? { current.withLock { $0?.issuedAt } }

    private func fresh(_ token: SharedProviderToken, at now: Date) -> Bool {
        let age = now.timeIntervalSince(token.issuedAt)
        return age >= -60 && age < refreshAfter
    }

    /// Whether a stored token was signed with this node's key for its team: a node configured with another key
    /// under the same ids must not send it (APNs would answer InvalidProviderToken); it replaces it instead.
    private func signedByThisKey(_ token: SharedProviderToken) -> Bool {
        guard
            let claims = try? ProviderJWT.verify(
                token.token,
                key: { $0 == identity.keyID ? identity.publicKey : nil }
            )
        else { return false }
        return claims.teamID == identity.teamID
    }

    @discardableResult
    private func adopt(_ token: SharedProviderToken) -> SharedProviderToken {
        current.withLock { $0 = token }
        return token
    }

    /// The deployment's token, or nil when there is none or the store cannot say.
    private func sharedToken() async -> SharedProviderToken? {
        guard let store else { return nil }
        do {
            return try await store.providerToken(teamID: identity.teamID, keyID: identity.keyID)
        } catch {
            logger?.warning(
                "cannot read the shared APNs provider token",
                metadata: ["apns.key_id": "\(identity.keyID)", "error": "\(error)"]
            )
            return nil
        }
    }

    /// Signs a token and publishes it, adopting whichever token won (this one or another node's).
    private func issue(at now: Date, replacing shared: SharedProviderToken?) async throws -> SharedProviderToken {
        let candidate = SharedProviderToken(token: try ProviderJWT.sign(identity, issuedAt: now), issuedAt: now)
        guard let store else { return adopt(candidate) }
        do {
            let winner = try await store.publishProviderToken(
                teamID: identity.teamID,
                keyID: identity.keyID,
                candidate: candidate,
                replacing: shared?.issuedAt
            )
            if winner == candidate {
                logger?.notice(
                    "new APNs provider token published for the deployment",
                    metadata: ["apns.key_id": "\(identity.keyID)"]
                )
            }
            return adopt(winner)
        } catch {
            // Pushing goes on with a token of this node's own; the next refresh tries the store again.
            logger?.warning(
                "cannot publish the APNs provider token; this node uses its own until the store answers",
                metadata: ["apns.key_id": "\(identity.keyID)", "error": "\(error)"]
            )
            return adopt(candidate)
        }
    }
}
