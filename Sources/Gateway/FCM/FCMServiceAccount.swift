import Crypto
import Foundation
import _CryptoExtras

/// A Firebase project's service account, from the JSON key Google's console downloads: the project, the
/// account's address, its RSA key and where its OAuth2 tokens come from.
public struct FCMServiceAccount: Sendable {
    public var projectID: String
    public var clientEmail: String
    /// The key's id (`private_key_id`), sent as the assertion's `kid`; nil when the file names none.
    public var privateKeyID: String?
    /// Where the JWT-bearer exchange is made (`token_uri`; Google's when the file names none).
    public var tokenURI: URL
    let key: _RSA.Signing.PrivateKey

    public static let googleTokenURI = URL(string: "https://oauth2.googleapis.com/token")!
    /// The one scope sending needs.
    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"

    /// Reads and validates the JSON key: every field it needs is there and well formed, the private key is an RSA
    /// key of at least 2,048 bits, and an assertion it signs verifies against its public key. Errors name the field
    /// at fault and never repeat the key.
    public init(json: Data) throws(FCMServiceAccountError) {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw FCMServiceAccountError("the service account key is not a JSON object")
        }
        func text(_ field: String) throws(FCMServiceAccountError) -> String {
            guard let value = object[field] as? String, !value.isEmpty else {
                throw FCMServiceAccountError("the service account key has no \(field)")
            }
            return value
        }
        if let type = object["type"] as? String, type != "service_account" {
            throw FCMServiceAccountError("the key's type is \(type), not service_account")
        }
        let projectID = try text("project_id")
        // Project ids: 6-30 lower-case letters, digits and hyphens (Google's rule), so it is safe in a path.
        guard (6...30).contains(projectID.count),
            projectID.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" })
        else { throw FCMServiceAccountError("project_id is not a Firebase project id") }
        let clientEmail = try text("client_email")
        guard clientEmail.contains("@"), clientEmail.count <= 320 else {
            throw FCMServiceAccountError("client_email is not an address")
        }
        let pem = try text("private_key")
        let key: _RSA.Signing.PrivateKey
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw FCMServiceAccountError("private_key is not an RSA private key of at least 2048 bits (PEM)")
        }
        var tokenURI = Self.googleTokenURI
        if object["token_uri"] != nil {
            guard let given = URL(string: try text("token_uri")), given.scheme == "https", given.host != nil else {
                throw FCMServiceAccountError("token_uri is not an https URL")
            }
            tokenURI = given
        }
        self.init(
            projectID: projectID,
            clientEmail: clientEmail,
            privateKeyID: object["private_key_id"] as? String,
            tokenURI: tokenURI,
            key: key
        )
        // The key must sign what its public key verifies: a key pasted from another account, or damaged, fails
        // here rather than at the token endpoint.
        guard
            let assertion = try? assertion(issuedAt: Date()),
            FCMAssertion.verify(assertion, key: key.publicKey) != nil
        else { throw FCMServiceAccountError("private_key does not verify what it signs") }
    }

    public init(
        projectID: String,
        clientEmail: String,
        privateKeyID: String?,
        tokenURI: URL = FCMServiceAccount.googleTokenURI,
        key: _RSA.Signing.PrivateKey
    ) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
        self.key = key
    }

    public var publicKey: _RSA.Signing.PublicKey { key.publicKey }

    /// SHA-256 of the public key (DER), hex: tells two uploads apart without showing either.
    public var fingerprint: String {
        SHA256.hash(data: key.publicKey.derRepresentation).map { String(format: "%02x", $0) }.joined()
    }

    /// The signed JWT this account exchanges for an access token (RFC 7523), valid for an hour.
    public func assertion(issuedAt: Date) throws -> String {
        try FCMAssertion.sign(
            FCMAssertion.Claims(
                issuer: clientEmail,
                audience: tokenURI.absoluteString,
                scope: Self.messagingScope,
                issuedAt: issuedAt,
                expiresAt: issuedAt + 3600
            ),
            keyID: privateKeyID,
            key: key
        )
    }

    /// The key file as Google writes it (for tests, the simulator's demo accounts and the benchmark's peer).
    public func json() -> Data {
        var object: [String: String] = [
            "type": "service_account", "project_id": projectID, "client_email": clientEmail,
            "private_key": key.pemRepresentation, "token_uri": tokenURI.absoluteString,
        ]
        if let privateKeyID { object["private_key_id"] = privateKeyID }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    }
}

public struct FCMServiceAccountError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// RS256 JSON Web Tokens as Google's OAuth2 JWT-bearer grant takes them.
public enum FCMAssertion {
    public struct Claims: Sendable, Equatable, Codable {
        public var issuer: String
        public var audience: String
        public var scope: String
        public var issuedAt: Date
        public var expiresAt: Date

        enum CodingKeys: String, CodingKey {
            case issuer = "iss"
            case audience = "aud"
            case scope
            case issuedAt = "iat"
            case expiresAt = "exp"
        }

        public init(issuer: String, audience: String, scope: String, issuedAt: Date, expiresAt: Date) {
            self.issuer = issuer
            self.audience = audience
            self.scope = scope
            self.issuedAt = issuedAt
            self.expiresAt = expiresAt
        }
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Int64(date.timeIntervalSince1970))
        }
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    public static func sign(_ claims: Claims, keyID: String?, key: _RSA.Signing.PrivateKey) throws -> String {
        var header = ["alg": "RS256", "typ": "JWT"]
        if let keyID { header["kid"] = keyID }
        let encoder = encoder()
        let input =
            ProviderJWT.base64URL(try encoder.encode(header)) + "." + ProviderJWT.base64URL(try encoder.encode(claims))
        let signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + ProviderJWT.base64URL(signature.rawRepresentation)
    }

    /// The claims of an RS256 assertion whose signature `key` verifies; nil for anything else.
    public static func verify(_ token: String, key: _RSA.Signing.PublicKey) -> Claims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = ProviderJWT.decodeBase64URL(parts[0]),
            let claims = ProviderJWT.decodeBase64URL(parts[1]),
            let signature = ProviderJWT.decodeBase64URL(parts[2]),
            (try? JSONDecoder().decode([String: String].self, from: header))?["alg"] == "RS256",
            key.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature),
                for: Data((parts[0] + "." + parts[1]).utf8),
                padding: .insecurePKCS1v1_5
            )
        else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try? decoder.decode(Claims.self, from: claims)
    }

    /// The issuer an assertion claims, read without verifying it (to find the key that must verify it).
    public static func claimedIssuer(_ token: String) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let claims = ProviderJWT.decodeBase64URL(parts[1]) else { return nil }
        return (try? JSONSerialization.jsonObject(with: claims) as? [String: Any])?["iss"] as? String
    }
}
