import Crypto
import Foundation
import TestSupport
import Testing
import _CryptoExtras

@testable import Gateway

/// Issue 46, item 1: an identity provider's token is accepted only when a key of its set signed it with an
/// asymmetric algorithm that key allows, for the tenant's issuer and clients, within its times (60 s of skew).
@Suite("Identity provider tokens", .timeLimit(.minutes(2)))
struct IdentityTokenTests {
    static let rsa = try! _RSA.Signing.PrivateKey(keySize: .bits2048)
    static let ec = P256.Signing.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let policy = IdentityTokenPolicy(issuer: "https://login.acme.example/tenant", audiences: ["app-client"])

    static func b64(_ data: Data) -> String { ProviderJWT.base64URL(data) }

    /// The provider's published set: the RSA key as "r1", the P-256 key as "e1", and keys the broker must skip.
    static var keySetJSON: Data {
        let primitives = try! rsa.publicKey.getKeyPrimitives()
        let point = ec.publicKey.x963Representation
        let keys: [[String: Any]] = [
            [
                "kty": "RSA", "kid": "r1", "use": "sig", "n": b64(primitives.modulus),
                "e": b64(primitives.publicExponent),
            ],
            ["kty": "EC", "kid": "e1", "crv": "P-256", "x": b64(point[1..<33]), "y": b64(point[33..<65])],
            // An encryption key, a curve this broker does not verify, a symmetric key: skipped.
            [
                "kty": "RSA", "kid": "enc", "use": "enc", "n": b64(primitives.modulus),
                "e": b64(primitives.publicExponent),
            ],
            ["kty": "EC", "kid": "p384", "crv": "P-384", "x": b64(Data(count: 48)), "y": b64(Data(count: 48))],
            ["kty": "oct", "kid": "h1", "k": b64(Data("secret".utf8))],
        ]
        return try! JSONSerialization.data(withJSONObject: ["keys": keys])
    }

    var keys: JSONWebKeySet { try! JSONWebKeySet(json: Self.keySetJSON) }

    func claims(_ changes: [String: Any] = [:]) -> [String: Any] {
        var claims: [String: Any] = [
            "iss": policy.issuer, "aud": "app-client", "sub": "00u-ada", "preferred_username": "ada@acme.example",
            "groups": ["wellbeing-admins", "staff"], "iat": now.timeIntervalSince1970 - 10,
            "exp": now.timeIntervalSince1970 + 3600,
        ]
        for (name, value) in changes { claims[name] = value is NSNull ? nil : value }
        return claims
    }

    /// A compact JWS over `header` and `claims`, signed as `alg` says (or with `sign`, for forgeries).
    func token(_ header: [String: Any], _ claims: [String: Any], sign: ((Data) throws -> Data)? = nil) throws -> String
    {
        let input =
            Self.b64(try JSONSerialization.data(withJSONObject: header)) + "."
            + Self.b64(try JSONSerialization.data(withJSONObject: claims))
        let data = Data(input.utf8)
        let signature: Data
        if let sign {
            signature = try sign(data)
        } else {
            switch header["alg"] as? String {
            case "RS256": signature = try Self.rsa.signature(for: data, padding: .insecurePKCS1v1_5).rawRepresentation
            case "PS256": signature = try Self.rsa.signature(for: data, padding: .PSS).rawRepresentation
            case "ES256": signature = try Self.ec.signature(for: data).rawRepresentation
            default: signature = Data()
            }
        }
        return input + "." + Self.b64(signature)
    }

    func refusal(
        _ token: String,
        keys: JSONWebKeySet? = nil,
        policy: IdentityTokenPolicy? = nil
    )
        -> IdentityTokenError.Code?
    {
        do {
            _ = try IdentityToken.verify(token, keys: keys ?? self.keys, policy: policy ?? self.policy, now: now)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("RS256, PS256 and ES256 tokens of the provider's keys are accepted, their claims read")
    func accepted() throws {
        #expect(keys.keys.map(\.id) == ["r1", "e1"])
        for (alg, kid) in [("RS256", "r1"), ("PS256", "r1"), ("ES256", "e1")] {
            let verified = try IdentityToken.verify(
                try token(["alg": alg, "kid": kid, "typ": "JWT"], claims()),
                keys: keys,
                policy: policy,
                now: now
            )
            #expect(verified.subject == "00u-ada")
            #expect(verified.strings["preferred_username"] == "ada@acme.example")
            #expect(verified.lists["groups"] == ["wellbeing-admins", "staff"])
            #expect(verified.expiresAt == now.addingTimeInterval(3600))
        }
        // Without a kid, every key that fits the algorithm is tried; an audience list needs one of ours.
        #expect(refusal(try token(["alg": "ES256"], claims())) == nil)
        #expect(refusal(try token(["alg": "RS256", "kid": "r1"], claims(["aud": ["api", "app-client"]]))) == nil)
    }

    @Test("none, HMAC with the public key, a key of the wrong kind or pin, and a forged signature are refused")
    func forgeries() throws {
        #expect(refusal(try token(["alg": "none"], claims())) == .unsupportedAlgorithm)
        #expect(refusal(try token(["typ": "JWT"], claims())) == .unsupportedAlgorithm)
        // The classic confusion: HS256 keyed with the provider's public key, which anyone can fetch.
        let publicKey = Data(Self.rsa.publicKey.pemRepresentation.utf8)
        let hmac = try token(["alg": "HS256", "kid": "r1"], claims()) { input in
            Data(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: publicKey)))
        }
        #expect(refusal(hmac) == .unsupportedAlgorithm)
        // ES256 under the RSA key's kid, RS256 under the EC key's: no key allows it.
        #expect(refusal(try token(["alg": "ES256", "kid": "r1"], claims())) == .unsupportedAlgorithm)
        #expect(refusal(try token(["alg": "RS256", "kid": "e1"], claims())) == .unsupportedAlgorithm)
        // A key pinned to RS256 does not check PS256.
        var pinned = keys
        pinned.keys[0].algorithm = "RS256"
        let pss = try token(["alg": "PS256", "kid": "r1"], claims())
        #expect(throws: IdentityTokenError.self) {
            try IdentityToken.verify(pss, keys: pinned, policy: policy, now: now)
        }
        // Claims changed after signing; a signature by another key of the same kind.
        let signed = try token(["alg": "RS256", "kid": "r1"], claims())
        let parts = signed.split(separator: ".")
        let tampered = [
            parts[0], Substring(Self.b64(try JSONSerialization.data(withJSONObject: claims(["sub": "root"])))),
            parts[2],
        ]
        .joined(separator: ".")
        #expect(refusal(tampered) == .badSignature)
        let stranger = P256.Signing.PrivateKey()
        #expect(
            refusal(
                try token(["alg": "ES256", "kid": "e1"], claims()) { try stranger.signature(for: $0).rawRepresentation }
            ) == .badSignature
        )
        // An unknown kid sends the caller to fetch the set again; critical extensions and garbage are malformed.
        #expect(refusal(try token(["alg": "RS256", "kid": "r2"], claims())) == .unknownKey)
        #expect(refusal(try token(["alg": "RS256", "kid": "r1", "crit": ["b64"]], claims())) == .malformed)
        #expect(refusal("not.a-token") == .malformed)
        #expect(refusal(String(repeating: "a", count: IdentityToken.maximumBytes + 1)) == .malformed)
    }

    @Test("Another issuer, other audiences or parties, and times outside 60 s of skew are refused")
    func claimsChecked() throws {
        func signed(_ changes: [String: Any]) throws -> String {
            try token(["alg": "ES256", "kid": "e1"], claims(changes))
        }
        let t = now.timeIntervalSince1970
        #expect(refusal(try signed(["iss": "https://login.other.example/tenant"])) == .wrongIssuer)
        #expect(refusal(try signed(["iss": policy.issuer + "/"])) == .wrongIssuer)
        #expect(refusal(try signed(["aud": "other-client"])) == .wrongAudience)
        #expect(refusal(try signed(["aud": ["api", "other"]])) == .wrongAudience)
        #expect(refusal(try signed(["azp": "other-client"])) == .wrongAudience)
        #expect(refusal(try signed(["exp": t - 61])) == .expired)
        #expect(refusal(try signed(["exp": t - 59])) == nil)
        #expect(refusal(try signed(["exp": NSNull()])) == .missingClaim)
        #expect(refusal(try signed(["nbf": t + 61])) == .notYetValid)
        #expect(refusal(try signed(["nbf": t + 59])) == nil)
        #expect(refusal(try signed(["iat": t + 300])) == .notYetValid)
        #expect(refusal(try signed(["sub": ""])) == .missingClaim)
        // A token of another tenant's provider: the same keys would not even be asked, but its issuer is refused.
        let other = IdentityTokenPolicy(issuer: "https://login.globex.example", audiences: ["app-client"])
        #expect(refusal(try signed([:]), policy: other) == .wrongIssuer)
    }

    @Test("A key set that is not one is refused; small RSA keys are skipped")
    func keySets() throws {
        #expect(throws: IdentityTokenError.self) { try JSONWebKeySet(json: Data("[]".utf8)) }
        #expect(throws: IdentityTokenError.self) { try JSONWebKeySet(json: Data("{\"keys\": 3}".utf8)) }
        #expect(throws: IdentityTokenError.self) {
            try JSONWebKeySet(json: Data(count: JSONWebKeySet.maximumBytes + 1))
        }
        let small = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)).publicKey
        let primitives = try small.getKeyPrimitives()
        let set = try JSONWebKeySet(
            json: try JSONSerialization.data(withJSONObject: [
                "keys": [
                    [
                        "kty": "RSA", "kid": "weak", "n": Self.b64(primitives.modulus),
                        "e": Self.b64(primitives.publicExponent),
                    ]
                ]
            ])
        )
        #expect(set.keys.isEmpty)
        // A P-256 coordinate written without its leading zero bytes (as PyJWT 2.6 writes about one key in a hundred)
        // is padded back; one longer than 32 bytes is skipped.
        var key = P256.Signing.PrivateKey()
        while key.publicKey.x963Representation[1] != 0 { key = P256.Signing.PrivateKey() }
        let point = key.publicKey.x963Representation
        let short = try JSONWebKeySet(
            json: try JSONSerialization.data(withJSONObject: [
                "keys": [
                    [
                        "kty": "EC", "kid": "short", "crv": "P-256", "x": Self.b64(point[2..<33]),
                        "y": Self.b64(point[33..<65]),
                    ],
                    [
                        "kty": "EC", "kid": "long", "crv": "P-256", "x": Self.b64(Data([0]) + point[1..<33]),
                        "y": Self.b64(point[33..<65]),
                    ],
                ]
            ])
        )
        #expect(short.keys.map(\.id) == ["short"])
        if case .p256(let parsed) = short.keys.first?.material {
            #expect(parsed.x963Representation == point)
        } else {
            Issue.record("no P-256 key")
        }
    }
    /// What PyJWT (Debian's python3-jwt, an implementation independent of this one) signs with keys it made, and the
    /// key set it publishes for them: accepted, except the token that expired a minute and a half ago.
    @Test("Tokens PyJWT signed with RS256, PS256 and ES256 verify against the key set it published")
    func peerSignedTokens() async throws {
        let script = """
            import json, sys, jwt
            from cryptography.hazmat.primitives.asymmetric import rsa, ec
            from jwt.algorithms import RSAAlgorithm, ECAlgorithm
            now = int(sys.argv[1])
            r = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            e = ec.generate_private_key(ec.SECP256R1())
            keys = [dict(json.loads(RSAAlgorithm.to_jwk(r.public_key())), kid="py-r", use="sig"),
                    dict(json.loads(ECAlgorithm.to_jwk(e.public_key())), kid="py-e")]
            claims = dict(iss=sys.argv[2], aud=["app-client", "api"], sub="peer-ada", email="ada@acme.example",
                          groups=["staff"], iat=now - 5, nbf=now - 5, exp=now + 600)
            tokens = {alg: jwt.encode(claims, key, algorithm=alg, headers=dict(kid=kid))
                      for alg, key, kid in [("RS256", r, "py-r"), ("PS256", r, "py-r"), ("ES256", e, "py-e")]}
            tokens["expired"] = jwt.encode(dict(claims, exp=now - 90), e, algorithm="ES256", headers=dict(kid="py-e"))
            print(json.dumps(dict(jwks=dict(keys=keys), tokens=tokens)))
            """
        let output = try await offThePool { () throws -> Data in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", script, String(Int(now.timeIntervalSince1970)), policy.issuer]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw CocoaError(.executableLoad) }
            return data
        }
        let peer = try #require(try JSONSerialization.jsonObject(with: output) as? [String: Any])
        let tokens = try #require(peer["tokens"] as? [String: String])
        let set = try JSONWebKeySet(json: try JSONSerialization.data(withJSONObject: try #require(peer["jwks"])))
        #expect(set.keys.map(\.id) == ["py-r", "py-e"])
        for alg in ["RS256", "PS256", "ES256"] {
            let verified = try IdentityToken.verify(try #require(tokens[alg]), keys: set, policy: policy, now: now)
            #expect(verified.subject == "peer-ada" && verified.strings["email"] == "ada@acme.example", "\(alg)")
        }
        let expired = try #require(tokens["expired"])
        #expect(refusal(expired, keys: set) == .expired)
    }
}
