import Crypto
import Foundation
import _CryptoExtras

/// The signature algorithms an identity provider's tokens may use here: asymmetric only. `none` and the HMAC family
/// are not among them, so a token "signed" with a provider's public key as an HMAC secret has nothing to verify it.
public enum JWSAlgorithm: String, Sendable, CaseIterable {
    case rs256 = "RS256"
    case ps256 = "PS256"
    case es256 = "ES256"
}

/// A provider's signing keys (RFC 7517), as its `jwks_uri` serves them. Only keys that can verify one of the
/// algorithms above are kept: RSA keys of at least 2048 bits and P-256 keys, meant for signatures (`use` "sig" or
/// absent, `key_ops` holding "verify" or absent). A provider's other keys (encryption keys, other curves) are
/// skipped, not refused: the set still verifies with the rest.
public struct JSONWebKeySet: Sendable {
    public struct Key: Sendable {
        public enum Material: Sendable {
            case rsa(_RSA.Signing.PublicKey)
            case p256(P256.Signing.PublicKey)
        }

        /// `kid`, when the provider names its keys (they all do once they rotate).
        public var id: String?
        /// `alg`, when the provider pins the key to one algorithm.
        public var algorithm: String?
        public var material: Material

        /// Whether a token whose header says `algorithm` may be checked with this key: the key's kind fits it, and
        /// the key's own `alg`, if it names one, is the same. An RSA key serves RS256 and PS256, a P-256 key ES256.
        public func allows(_ algorithm: JWSAlgorithm) -> Bool {
            if let pinned = self.algorithm, pinned != algorithm.rawValue { return false }
            switch (material, algorithm) {
            case (.rsa, .rs256), (.rsa, .ps256), (.p256, .es256): return true
            case (.rsa, .es256), (.p256, .rs256), (.p256, .ps256): return false
            }
        }
    }

    public var keys: [Key]
    /// How many keys of a set are kept (providers publish a handful; a set of thousands is not a provider's).
    public static let maximumKeys = 32
    /// The largest document read as a key set.
    public static let maximumBytes = 256 * 1024

    public init(keys: [Key]) {
        self.keys = keys
    }

    /// The set a `jwks_uri` answered with. Refused when it is not a JSON object with a `keys` array or is larger
    /// than `maximumBytes`; keys this broker cannot use are skipped.
    public init(json: Data) throws(IdentityTokenError) {
        guard json.count <= Self.maximumBytes else {
            throw IdentityTokenError(.malformedKeySet, "the key set is larger than \(Self.maximumBytes) bytes")
        }
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
            let entries = object["keys"] as? [Any]
        else { throw IdentityTokenError(.malformedKeySet, "the key set is not a JSON object with a keys array") }
        keys = entries.prefix(Self.maximumKeys).compactMap { ($0 as? [String: Any]).flatMap(Self.key) }
    }

    /// One JWK, or nil when it is not a signature key this broker can use.
    static func key(_ entry: [String: Any]) -> Key? {
        if let use = entry["use"] as? String, use != "sig" { return nil }
        if let operations = entry["key_ops"] as? [String], !operations.contains("verify") { return nil }
        let id = entry["kid"] as? String
        let algorithm = entry["alg"] as? String
        if let algorithm, JWSAlgorithm(rawValue: algorithm) == nil { return nil }
        func bytes(_ name: String) -> Data? {
            (entry[name] as? String).flatMap { ProviderJWT.decodeBase64URL(Substring($0)) }
        }
        switch entry["kty"] as? String {
        case "RSA":
            guard let n = bytes("n"), let e = bytes("e"),
                let key = try? _RSA.Signing.PublicKey(n: n, e: e), key.keySizeInBits >= 2048
            else { return nil }
            return Key(id: id, algorithm: algorithm, material: .rsa(key))
        case "EC":
            // RFC 7518 asks for 32 bytes each; some libraries (PyJWT 2.6, seen in this suite about once in a hundred
            // keys) drop leading zero bytes, so shorter coordinates are padded back rather than the key skipped.
            func coordinate(_ name: String) -> Data? {
                guard let value = bytes(name), (1...32).contains(value.count) else { return nil }
                return Data(count: 32 - value.count) + value
            }
            guard entry["crv"] as? String == "P-256", let x = coordinate("x"), let y = coordinate("y"),
                let key = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y)
            else { return nil }
            return Key(id: id, algorithm: algorithm, material: .p256(key))
        default:
            return nil
        }
    }

    /// The keys that may check a token signed with `algorithm` under header `kid` `id`: the ones of that id, or,
    /// for a token without a `kid`, every key that fits the algorithm.
    func candidates(id: String?, for algorithm: JWSAlgorithm) -> [Key] {
        keys.filter { $0.allows(algorithm) && (id == nil || $0.id == id) }
    }

    /// Whether any key carries `id` at all (an unknown `kid` sends the caller to fetch the set again).
    func knows(id: String) -> Bool { keys.contains { $0.id == id } }
}
