import Crypto
import Foundation
import Logging
import NIOSSL
import SwiftASN1
import X509

/// Where the listener's certificate and key come from.
public struct TLSFiles: Sendable {
    public var certificatePath: String
    public var privateKeyPath: String

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }

    /// The configured files, or a self-signed pair generated once into `directory` (`tls/`) and reused after.
    public static func configuredOrSelfSigned(
        certificatePath: String?,
        privateKeyPath: String?,
        directory: String,
        hostnames: [String],
        logger: Logger
    ) throws -> TLSFiles {
        if let certificatePath, let privateKeyPath {
            return TLSFiles(certificatePath: certificatePath, privateKeyPath: privateKeyPath)
        }
        let files = TLSFiles(
            certificatePath: directory + "/tls/self-signed.crt",
            privateKeyPath: directory + "/tls/self-signed.key"
        )
        let manager = FileManager.default
        if manager.fileExists(atPath: files.certificatePath), manager.fileExists(atPath: files.privateKeyPath) {
            return files
        }
        try manager.createDirectory(atPath: directory + "/tls", withIntermediateDirectories: true)
        let (certificate, key) = try SelfSignedCertificate.make(hostnames: hostnames)
        // The key is written first and only readable by its owner.
        guard
            manager.createFile(
                atPath: files.privateKeyPath,
                contents: Data(key.utf8),
                attributes: [.posixPermissions: 0o600]
            ),
            manager.createFile(atPath: files.certificatePath, contents: Data(certificate.utf8))
        else {
            throw TLSSetupError(message: "cannot write the self-signed certificate into \(directory)/tls")
        }
        logger.notice(
            "generated a self-signed TLS certificate; configure tls.certificate and tls.privateKey for production",
            metadata: ["tls.certificate": "\(files.certificatePath)"]
        )
        return files
    }

    /// When the listener's certificate (the first in its file) expires; nil when the file cannot be read.
    public func certificateExpiry() -> Date? {
        guard let certificate = try? NIOSSLCertificate.fromPEMFile(certificatePath).first else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))
    }

    /// A server TLS configuration offering `h2` and `http/1.1` through ALPN.
    /// TLS 1.2 suites offered: ECDHE with AEAD ciphers only, as HTTP/2 requires (RFC 9113 section 9.2.2); TLS 1.3
    /// suites are all AEAD.
    public static let aeadCipherSuites = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    public func serverConfiguration() throws -> TLSConfiguration {
        do {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map {
                NIOSSLCertificateSource.certificate($0)
            }
            let key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain,
                privateKey: .privateKey(key)
            )
            configuration.minimumTLSVersion = .tlsv12
            configuration.cipherSuites = Self.aeadCipherSuites
            configuration.applicationProtocols = ["h2", "http/1.1"]
            return configuration
        } catch {
            throw TLSSetupError(message: "cannot load the TLS certificate or key (\(certificatePath)): \(error)")
        }
    }
}

public struct TLSSetupError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Generates a P-256 self-signed certificate for local use.
enum SelfSignedCertificate {
    static func make(
        hostnames: [String],
        validity: TimeInterval = 825 * 86_400
    ) throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let certificateKey = Certificate.PrivateKey(key)
        let name = try DistinguishedName {
            CommonName(hostnames.first ?? "localhost")
            OrganizationName("Impulse Broker (self-signed)")
        }
        var names: [GeneralName] = hostnames.map { .dnsName($0) }
        names.append(.ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])))
        names.append(.ipAddress(ASN1OctetString(contentBytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])))
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: certificateKey.publicKey,
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(validity),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            // No key usage or basic constraints: a client that trusts this one certificate uses it as its own anchor,
            // and BoringSSL refuses a self-issued anchor whose key usage lacks certificate signing.
            extensions: try Certificate.Extensions {
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: certificateKey
        )
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }
}
