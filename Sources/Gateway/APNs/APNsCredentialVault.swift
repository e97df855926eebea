import Crypto
import Engine
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// Seals uploaded push credentials (APNs' keys and certificates, FCM's service accounts) with the broker's credential key (AES-256-GCM, bound to the tenant and the
/// credential's id, so a sealed secret copied to another row does not open), checks uploads, and opens stored ones
/// for the push transport. Without a key nothing can be uploaded.
public struct APNsCredentialVault: APNsCredentialInspector {
    let key: SymmetricKey?

    /// `key`: 32 bytes (from `credentialKeyFile` or `BROKER_CREDENTIAL_KEY`); nil refuses uploads.
    public init(key: [UInt8]?) {
        self.key = key.map { SymmetricKey(data: $0) }
    }

    /// The secret as it is sealed.
    struct Secret: Codable {
        var teamID: String?
        var keyID: String?
        var privateKeyPEM: String?
        var pkcs12: Data?
        var passphrase: String?
        /// An FCM service account's JSON key, as uploaded.
        var serviceAccount: Data?
    }

    public func inspect(_ upload: APNsCredentialUpload, id: String, tenant: TenantID) throws -> InspectedAPNsCredential
    {
        guard key != nil else {
            throw EngineError(
                .conflict,
                "this broker has no credential key (credentialKeyFile or BROKER_CREDENTIAL_KEY): credentials cannot be stored encrypted"
            )
        }
        switch upload {
        case .token(let teamID, let keyID, let pem):
            let identity = try Self.signingIdentity(teamID: teamID, keyID: keyID, pem: pem)
            // The key signs a provider token, and its public key verifies it.
            guard let token = try? ProviderJWT.sign(identity, issuedAt: Date()),
                (try? ProviderJWT.verify(token, key: { $0 == keyID ? identity.publicKey : nil })) != nil
            else { throw EngineError(.invalidInput, "the key does not sign a provider token") }
            let secret = Secret(teamID: teamID, keyID: keyID, privateKeyPEM: pem)
            return InspectedAPNsCredential(
                kind: .token,
                teamID: teamID,
                keyID: keyID,
                topics: [],
                notAfter: nil,
                fingerprint: Self.hex(SHA256.hash(data: identity.publicKey.derRepresentation)),
                sealed: try seal(secret, id: id, tenant: tenant)
            )
        case .certificate(let bytes, let passphrase):
            let (certificate, _) = try Self.bundle(bytes, passphrase: passphrase)
            let der = try certificate.toDERBytes()
            let parsed: Certificate
            do { parsed = try Certificate(derEncoded: der) } catch {
                throw EngineError(.invalidInput, "the certificate cannot be read")
            }
            return InspectedAPNsCredential(
                kind: .certificate,
                teamID: nil,
                keyID: nil,
                topics: Self.topics(parsed),
                notAfter: parsed.notValidAfter,
                fingerprint: Self.hex(SHA256.hash(data: der)),
                sealed: try seal(Secret(pkcs12: Data(bytes), passphrase: passphrase), id: id, tenant: tenant)
            )
        case .serviceAccount(let json):
            // Every field it needs, an RSA key of 2048 bits or more, and an assertion its public key verifies.
            let account: FCMServiceAccount
            do { account = try FCMServiceAccount(json: json) } catch {
                throw EngineError(.invalidInput, error.description)
            }
            return InspectedAPNsCredential(
                kind: .serviceAccount,
                teamID: account.projectID,
                keyID: account.privateKeyID,
                topics: [account.clientEmail],
                notAfter: nil,
                fingerprint: account.fingerprint,
                sealed: try seal(Secret(serviceAccount: json), id: id, tenant: tenant)
            )
        }
    }

    /// The FCM service account of a stored credential; throws when the key cannot open it.
    public func openServiceAccount(_ stored: StoredAPNsCredential) throws -> FCMServiceAccount {
        let secret = try secret(of: stored)
        guard stored.kind == .serviceAccount, let json = secret.serviceAccount else {
            throw EngineError(.invalidInput, "credential \(stored.id) is not an FCM service account")
        }
        do { return try FCMServiceAccount(json: json) } catch {
            throw EngineError(.invalidInput, "credential \(stored.id): \(error.description)")
        }
    }

    /// The push transport's credential of a stored one; throws when the key cannot open it (another key).
    public func open(_ stored: StoredAPNsCredential) throws -> APNsCredential {
        let secret = try secret(of: stored)
        switch stored.kind {
        case .token:
            return .token(
                try Self.signingIdentity(
                    teamID: secret.teamID ?? "",
                    keyID: secret.keyID ?? "",
                    pem: secret.privateKeyPEM ?? ""
                )
            )
        case .certificate:
            let (certificate, privateKey) = try Self.bundle(
                Array(secret.pkcs12 ?? Data()),
                passphrase: secret.passphrase ?? ""
            )
            return .certificate(chain: [.certificate(certificate)], key: .privateKey(privateKey))
        case .serviceAccount:
            throw EngineError(.invalidInput, "credential \(stored.id) is FCM's, not APNs'")
        }
    }

    /// The sealed secret, opened with the key and the credential's binding.
    func secret(of stored: StoredAPNsCredential) throws -> Secret {
        guard let key else { throw EngineError(.conflict, "this broker has no credential key") }
        guard let box = Data(base64Encoded: stored.sealed), let sealedBox = try? AES.GCM.SealedBox(combined: box),
            let plain = try? AES.GCM.open(
                sealedBox,
                using: key,
                authenticating: Self.binding(stored.id, stored.tenant)
            ),
            let secret = try? JSONDecoder().decode(Secret.self, from: plain)
        else {
            throw EngineError(.invalidInput, "the credential key does not open credential \(stored.id)")
        }
        return secret
    }

    func seal(_ secret: Secret, id: String, tenant: TenantID) throws -> String {
        guard let key else { throw EngineError(.conflict, "this broker has no credential key") }
        let box = try AES.GCM.seal(
            try JSONEncoder().encode(secret),
            using: key,
            authenticating: Self.binding(id, tenant)
        )
        guard let combined = box.combined else { throw EngineError(.storage, "cannot seal the credential") }
        return combined.base64EncodedString()
    }

    static func binding(_ id: String, _ tenant: TenantID) -> Data { Data("\(tenant.rawValue)/\(id)".utf8) }

    /// Apple's ids are ten characters of A-Z and 0-9.
    static func signingIdentity(teamID: String, keyID: String, pem: String) throws -> APNsSigningIdentity {
        func valid(_ id: String) -> Bool {
            id.utf8.count == 10 && id.utf8.allSatisfy { ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) }
        }
        guard valid(teamID), valid(keyID) else {
            throw EngineError(.invalidInput, "teamID and keyID are ten characters of A-Z and 0-9")
        }
        do { return try APNsSigningIdentity(teamID: teamID, keyID: keyID, p8: pem) } catch {
            throw EngineError(.invalidInput, "privateKey is not a P-256 key in PEM (.p8)")
        }
    }

    /// The bundle's leaf certificate and its key; refused when the passphrase does not open it, or the key is not
    /// the certificate's.
    static func bundle(_ bytes: [UInt8], passphrase: String) throws -> (NIOSSLCertificate, NIOSSLPrivateKey) {
        let bundle: NIOSSLPKCS12Bundle
        do { bundle = try NIOSSLPKCS12Bundle(buffer: bytes, passphrase: Array(passphrase.utf8)) } catch {
            throw EngineError(.invalidInput, "the PKCS#12 bundle does not open with this passphrase")
        }
        guard let leaf = bundle.certificateChain.first else {
            throw EngineError(.invalidInput, "the PKCS#12 bundle holds no certificate")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateChain = [.certificate(leaf)]
        tls.privateKey = .privateKey(bundle.privateKey)
        do { _ = try NIOSSLContext(configuration: tls) } catch {
            throw EngineError(.invalidInput, "the bundle's key is not its certificate's")
        }
        return (leaf, bundle.privateKey)
    }

    /// An APNs certificate names its app in the subject's UID (0.9.2342.19200300.100.1.1).
    static func topics(_ certificate: Certificate) -> [String] {
        let uid: ASN1ObjectIdentifier = [0, 9, 2342, 19_200_300, 100, 1, 1]
        var topics: [String] = []
        for relative in certificate.subject {
            for attribute in relative where attribute.type == uid {
                let text = String(describing: attribute.value)
                if !text.isEmpty, !topics.contains(text) { topics.append(text) }
            }
        }
        return topics
    }

    static func hex(_ digest: SHA256.Digest) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}

extension APNsCredentialVault {
    /// A credential's state as the admin API and the console show it: `unreadable` when this broker's credential
    /// key does not open it (the key was changed or lost; the credential cannot push and must be uploaded again),
    /// whatever the store says.
    func shownState(_ credential: StoredAPNsCredential) -> (state: String, lastError: String?) {
        let opens =
            credential.channel == .apns ? (try? open(credential)) != nil : (try? openServiceAccount(credential)) != nil
        guard opens else {
            return (
                "unreadable",
                "this broker's credential key does not open it (was the key changed?); upload the credential again"
            )
        }
        return (credential.state.rawValue, credential.lastError)
    }
}
