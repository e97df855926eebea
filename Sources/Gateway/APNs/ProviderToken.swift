import Crypto
import Foundation
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

/// One provider token per identity, shared by all its connections, renewed inside Apple's window.
///
/// Apple rejects tokens older than an hour and renewals more often than every 20 minutes, so a token is reused
/// for `refreshAfter` (45 minutes by default) and a forced renewal (after ExpiredProviderToken) is refused while
/// the current token is younger than 20 minutes.
public final class ProviderTokenCache: Sendable {
    public let identity: APNsSigningIdentity
    private let refreshAfter: TimeInterval
    private let minimumAge: TimeInterval = 20 * 60
    private let now: @Sendable () -> Date
    private let current = Mutex<(token: String, issuedAt: Date)?>(nil)
    private let file: ProviderTokenFile?

    /// - Parameter directory: where the current token is kept across restarts (see ``ProviderTokenFile``);
    ///   nil keeps it in memory only.
    public init(
        identity: APNsSigningIdentity,
        refreshAfter: Duration = .seconds(45 * 60),
        directory: String? = nil,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.identity = identity
        self.refreshAfter = TimeInterval(refreshAfter.components.seconds)
        self.now = now
        self.file = directory.map { ProviderTokenFile(directory: $0, identity: identity) }
    }

    /// The token to send now.
    public func token() throws -> String {
        let now = self.now()
        if let cached = current.withLock({ $0 }), now.timeIntervalSince(cached.issuedAt) < refreshAfter {
            return cached.token
        }
        if let stored = file?.load(for: identity, now: now, maximumAge: refreshAfter) {
            current.withLock { $0 = stored }
            return stored.token
        }
        return try issue(at: now)
    }

    /// Renews after APNs called the token expired; returns false (keeping the token) when the current one is
    /// younger than 20 minutes, since renewing then would earn TooManyProviderTokenUpdates.
    @discardableResult
    public func renew() throws -> Bool {
        let now = self.now()
        if let cached = current.withLock({ $0 }), now.timeIntervalSince(cached.issuedAt) < minimumAge { return false }
        _ = try issue(at: now)
        return true
    }

    /// When the current token was issued (for inspection).
    public var issuedAt: Date? { current.withLock { $0?.issuedAt } }

    private func issue(at now: Date) throws -> String {
        let token = try ProviderJWT.sign(identity, issuedAt: now)
        current.withLock { $0 = (token, now) }
        file?.save(token)
        return token
    }
}
