import Crypto
import Foundation
import _CryptoExtras

/// Why an identity provider's token was refused. Every case is answered 401 with a problem body; `unknownKey` also
/// sends the caller to fetch the provider's key set again (at most once a minute per tenant) before giving up.
public struct IdentityTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case malformed = "malformed-token"
        case unsupportedAlgorithm = "unsupported-algorithm"
        case unknownKey = "unknown-key"
        case badSignature = "bad-signature"
        case wrongIssuer = "wrong-issuer"
        case wrongAudience = "wrong-audience"
        case expired = "expired"
        case notYetValid = "not-yet-valid"
        case missingClaim = "missing-claim"
        case malformedKeySet = "malformed-key-set"
        /// Nothing cached of the provider's keys and the provider cannot be reached (answered 503, not 401).
        case providerUnavailable = "provider-unavailable"
    }

    public var code: Code
    /// Says what was wrong without repeating the token.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// What a tenant's provider must have said for its token to be accepted.
public struct IdentityTokenPolicy: Sendable, Equatable {
    /// `iss`, compared exactly (the discovery document's `issuer`).
    public var issuer: String
    /// Accepted `aud` values: the client ids of the apps and the console, and any API audience the tenant names.
    public var audiences: Set<String>
    /// How far clocks may disagree when `exp`, `nbf` and `iat` are judged.
    public var skew: TimeInterval

    public init(issuer: String, audiences: Set<String>, skew: TimeInterval = 60) {
        self.issuer = issuer
        self.audiences = audiences
        self.skew = skew
    }
}

/// A token whose signature, issuer, audience and times were checked: its claims, as far as the broker reads them.
public struct VerifiedIdentityToken: Sendable, Equatable {
    public var subject: String
    public var issuer: String
    public var audiences: [String]
    public var expiresAt: Date
    /// The claims whose values are strings (`preferred_username`, `email`, `oid`, `nonce`, ...).
    public var strings: [String: String]
    /// The claims whose values are arrays of strings (`groups`, `roles`, ...).
    public var lists: [String: [String]]
}

/// Checks a compact JWS identity token (an OpenID Connect ID token or a JWT access token) against a provider's keys
/// and a tenant's policy. Pure: the keys and the time are given, nothing is fetched.
public enum IdentityToken {
    /// The longest token read (an ID token with a few hundred groups is about 20 KiB).
    public static let maximumBytes = 32 * 1024

    public static func verify(
        _ token: String,
        keys: JSONWebKeySet,
        policy: IdentityTokenPolicy,
        now: Date
    ) throws(IdentityTokenError) -> VerifiedIdentityToken {
        guard token.utf8.count <= maximumBytes else {
            throw IdentityTokenError(.malformed, "the token is longer than \(maximumBytes) bytes")
        }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = ProviderJWT.decodeBase64URL(parts[0]),
            let claimsData = ProviderJWT.decodeBase64URL(parts[1]),
            let signature = ProviderJWT.decodeBase64URL(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { throw IdentityTokenError(.malformed, "not a compact JWS of three base64url parts with JSON objects") }
        let named = header["alg"] as? String ?? "(none)"
        guard let algorithm = JWSAlgorithm(rawValue: named) else {
            throw IdentityTokenError(
                .unsupportedAlgorithm,
                "alg \(named) is not accepted (only \(JWSAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")))"
            )
        }
        guard header["crit"] == nil else {
            throw IdentityTokenError(.malformed, "the header names critical extensions this broker does not know")
        }
        let keyID = header["kid"] as? String
        let candidates = keys.candidates(id: keyID, for: algorithm)
        guard !candidates.isEmpty else {
            if let keyID, !keys.knows(id: keyID) {
                throw IdentityTokenError(.unknownKey, "no key \(keyID) in the provider's key set")
            }
            throw IdentityTokenError(.unsupportedAlgorithm, "no key of the provider's allows \(algorithm.rawValue)")
        }
        let input = Data(parts[0].utf8) + Data(".".utf8) + Data(parts[1].utf8)
        guard candidates.contains(where: { valid(signature, of: input, by: $0.material, algorithm) }) else {
            throw IdentityTokenError(.badSignature, "the signature does not verify")
        }
        return try check(claims, policy: policy, now: now)
    }

    static func valid(
        _ signature: Data,
        of input: Data,
        by key: JSONWebKeySet.Key.Material,
        _ algorithm: JWSAlgorithm
    )
        -> Bool
    {
        switch (key, algorithm) {
        case (.rsa(let key), .rs256):
            key.isValidSignature(
                .init(rawRepresentation: signature),
                for: SHA256.hash(data: input),
                padding: .insecurePKCS1v1_5
            )
        case (.rsa(let key), .ps256):
            key.isValidSignature(.init(rawRepresentation: signature), for: SHA256.hash(data: input), padding: .PSS)
        case (.p256(let key), .es256):
            (try? P256.Signing.ECDSASignature(rawRepresentation: signature)).map {
                key.isValidSignature($0, for: SHA256.hash(data: input))
            } ?? false
        case (.rsa, .es256), (.p256, .rs256), (.p256, .ps256):
            false
        }
    }

    /// The claims of a token whose signature verified: issuer, audience and times.
    static func check(
        _ claims: [String: Any],
        policy: IdentityTokenPolicy,
        now: Date
    ) throws(IdentityTokenError)
        -> VerifiedIdentityToken
    {
        func time(_ name: String) -> Date? {
            (claims[name] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) }
        }
        guard let issuer = claims["iss"] as? String, issuer == policy.issuer else {
            throw IdentityTokenError(.wrongIssuer, "the token's iss is not the tenant's provider")
        }
        let audiences = (claims["aud"] as? String).map { [$0] } ?? (claims["aud"] as? [String]) ?? []
        guard audiences.contains(where: policy.audiences.contains) else {
            throw IdentityTokenError(.wrongAudience, "the token's aud names none of the tenant's clients")
        }
        // An authorised party, when named, must be one of the tenant's clients too (OpenID Connect Core 3.1.3.7).
        if let party = claims["azp"] as? String, !policy.audiences.contains(party) {
            throw IdentityTokenError(.wrongAudience, "the token's azp is not one of the tenant's clients")
        }
        guard let expiresAt = time("exp") else { throw IdentityTokenError(.missingClaim, "the token has no exp") }
        guard now.timeIntervalSince(expiresAt) < policy.skew else {
            throw IdentityTokenError(.expired, "the token expired at \(expiresAt)")
        }
        if let notBefore = time("nbf"), notBefore.timeIntervalSince(now) > policy.skew {
            throw IdentityTokenError(.notYetValid, "the token is not valid before \(notBefore)")
        }
        if let issuedAt = time("iat"), issuedAt.timeIntervalSince(now) > policy.skew {
            throw IdentityTokenError(.notYetValid, "the token was issued in the future (\(issuedAt))")
        }
        guard let subject = claims["sub"] as? String, !subject.isEmpty else {
            throw IdentityTokenError(.missingClaim, "the token has no sub")
        }
        var strings: [String: String] = [:]
        var lists: [String: [String]] = [:]
        for (name, value) in claims {
            if let text = value as? String {
                strings[name] = text
            } else if let list = value as? [String] {
                lists[name] = list
            }
        }
        return VerifiedIdentityToken(
            subject: subject,
            issuer: issuer,
            audiences: audiences,
            expiresAt: expiresAt,
            strings: strings,
            lists: lists
        )
    }
}
