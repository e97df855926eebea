import Foundation
import NIOSSL

/// Loads an APNs TLS client certificate (certificate-based authentication) into a client TLS configuration.
public enum APNsCertificate {
    /// From PEM files: the certificate (chain) and its private key.
    public static func tls(
        certificatePEM: String,
        privateKeyPEM: String,
        base: TLSConfiguration = .makeClientConfiguration()
    )
        throws -> TLSConfiguration
    {
        var configuration = base
        configuration.certificateChain = try NIOSSLCertificate.fromPEMFile(certificatePEM).map { .certificate($0) }
        configuration.privateKey = .privateKey(try NIOSSLPrivateKey(file: privateKeyPEM, format: .pem))
        return configuration
    }

    /// From a PKCS#12 (`.p12`) bundle, as Apple's Keychain exports it.
    public static func tls(
        pkcs12 path: String,
        passphrase: String,
        base: TLSConfiguration = .makeClientConfiguration()
    )
        throws -> TLSConfiguration
    {
        let bundle = try NIOSSLPKCS12Bundle(file: path, passphrase: Array(passphrase.utf8))
        var configuration = base
        configuration.certificateChain = bundle.certificateChain.map { .certificate($0) }
        configuration.privateKey = .privateKey(bundle.privateKey)
        return configuration
    }
}

extension APNsCredential {
    /// When a certificate credential's leaf certificate expires (nil: a signing key, which does not expire).
    public var certificateExpiry: Date? {
        guard case .certificate(let chain, _) = self, let leaf = chain.first else { return nil }
        let certificate: NIOSSLCertificate?
        switch leaf {
        case .certificate(let loaded): certificate = loaded
        case .file(let path): certificate = try? NIOSSLCertificate.fromPEMFile(path).first
        @unknown default: certificate = nil
        }
        return certificate.map { Date(timeIntervalSince1970: TimeInterval($0.notValidAfter)) }
    }
}
