import Crypto
import Foundation

/// A tenant's SCIM bearer token (issue 46, item 4): shown once when issued, kept only as its SHA-256. Rotating it
/// issues a new one and keeps the one before valid for an overlap (the directory's connector is updated by hand,
/// minutes or hours later), after which only the new one is accepted.
public struct ProvisioningTokens: Sendable, Equatable, Codable {
    public struct Digest: Sendable, Equatable, Codable {
        /// SHA-256 of the token, hex.
        public var sha256: String
        /// The token's first characters (`scim_` and four more), to tell tokens apart in the console and the audit.
        public var hint: String
        public var issuedAt: Date
    }

    public private(set) var current: Digest
    public private(set) var previous: Digest?
    /// When the previous token stops being accepted.
    public private(set) var previousExpiresAt: Date?

    /// The longest overlap a rotation may keep the old token for.
    public static let maximumOverlap: TimeInterval = 7 * 86_400
    public static let prefix = "scim_"

    /// A new token set: the token to show once, and what is kept.
    public static func issue(now: Date) -> (token: String, tokens: ProvisioningTokens) {
        let token = newToken()
        return (token, ProvisioningTokens(current: digest(token, now: now), previous: nil, previousExpiresAt: nil))
    }

    /// A new current token; the one before is accepted for `overlap` more (0: not at all).
    public func rotated(now: Date, overlap: TimeInterval) throws(EngineError) -> (token: String, tokens: Self) {
        guard (0...Self.maximumOverlap).contains(overlap) else {
            throw EngineError(.invalidInput, "the overlap must be 0 to 7 days")
        }
        let token = Self.newToken()
        let next = ProvisioningTokens(
            current: Self.digest(token, now: now),
            previous: overlap > 0 ? current : nil,
            previousExpiresAt: overlap > 0 ? now.addingTimeInterval(overlap) : nil
        )
        return (token, next)
    }

    /// Whether `token` is the current one, or the previous one within its overlap; compared in constant time.
    public func accepts(_ token: String, now: Date) -> Bool {
        guard token.hasPrefix(Self.prefix), token.utf8.count <= 128 else { return false }
        let presented = Self.sha256(token)
        var match = Self.same(presented, current.sha256)
        if let previous, let until = previousExpiresAt, now < until {
            match = Self.same(presented, previous.sha256) || match
        }
        return match
    }

    static func newToken() -> String { randomToken(prefix: Self.prefix) }

    static func sha256(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func digest(_ token: String, now: Date) -> Digest {
        Digest(sha256: sha256(token), hint: String(token.prefix(Self.prefix.count + 4)), issuedAt: now)
    }

    /// Equal strings of equal length, every byte looked at.
    static func same(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

/// 32 random bytes, base64url without padding, after `prefix` (so a secret is recognisable where it is pasted):
/// webhook signing secrets and SCIM tokens.
func randomToken(prefix: String) -> String {
    let text = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    return prefix
        + text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}
