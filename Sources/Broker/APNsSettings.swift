import ArgumentParser
import Crypto
import Engine
import Foundation
import Gateway
import NIOSSL

/// The `apns` member of the configuration file.
struct APNsFileSettings: Decodable {
    /// A signing key (`teamID`, `keyID`, `keyFile`), or a client certificate (`certificate` and `privateKey`
    /// PEM files, or `pkcs12` with `passphrase`).
    struct Credential: Decodable {
        var teamID: String?
        var keyID: String?
        var keyFile: String?
        var certificate: String?
        var privateKey: String?
        var pkcs12: String?
        var passphrase: String?
    }

    /// `simulator` (default: in-process), `apple`, `external` (another host, such as `broker apns-simulator`),
    /// or `disabled`.
    var mode: String?
    /// `host:port` of each environment for `external` (sandbox defaults to production).
    var production: String?
    var sandbox: String?
    /// A PEM file of extra trust roots (an external simulator's certificate).
    var trustRoots: String?
    /// The name the server certificate is checked against (default: the host).
    var serverHostname: String?
    /// The default credential, and per-tenant ones.
    var credential: Credential?
    var tenants: [String: Credential]?

    /// The settings with those the environment gives (a container's configuration): `BROKER_APNS_MODE`, the
    /// endpoints of mode `external` (`BROKER_APNS_PRODUCTION`, `BROKER_APNS_SANDBOX`, `BROKER_APNS_TRUST_ROOTS`,
    /// `BROKER_APNS_SERVER_HOSTNAME`) and a default signing key (`BROKER_APNS_TEAM_ID`, `BROKER_APNS_KEY_ID` and
    /// `BROKER_APNS_KEY_FILE`, all three, in place of the file's `credential`). Per-tenant credentials come from the
    /// file only.
    func overridden(by environment: [String: String]) throws -> APNsFileSettings {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var settings = self
        settings.mode = value("BROKER_APNS_MODE") ?? mode
        settings.production = value("BROKER_APNS_PRODUCTION") ?? production
        settings.sandbox = value("BROKER_APNS_SANDBOX") ?? sandbox
        settings.trustRoots = value("BROKER_APNS_TRUST_ROOTS") ?? trustRoots
        settings.serverHostname = value("BROKER_APNS_SERVER_HOSTNAME") ?? serverHostname
        let key = [value("BROKER_APNS_TEAM_ID"), value("BROKER_APNS_KEY_ID"), value("BROKER_APNS_KEY_FILE")]
        switch key.compactMap({ $0 }).count {
        case 0: break
        case 3: settings.credential = Credential(teamID: key[0], keyID: key[1], keyFile: key[2])
        default:
            throw ValidationError("BROKER_APNS_TEAM_ID, BROKER_APNS_KEY_ID and BROKER_APNS_KEY_FILE go together")
        }
        return settings
    }

    func setup() throws -> APNsSetup {
        switch mode ?? "simulator" {
        case "simulator": return .embeddedSimulator()
        case "disabled": return .disabled
        case "apple":
            return .external(
                endpoints: [.production: .production, .sandbox: .sandbox],
                defaultIdentity: try credential.map(load),
                identities: try tenantCredentials()
            )
        case "external":
            guard let production else {
                throw ValidationError("apns.production (host:port) is required for mode external")
            }
            var tls = TLSConfiguration.makeClientConfiguration()
            if let trustRoots { tls.trustRoots = .file(trustRoots) }
            func endpoint(_ text: String) throws -> APNsEndpoint {
                do {
                    let address = try ListenAddress(parsing: text)
                    return APNsEndpoint(
                        host: address.host,
                        port: address.port,
                        tls: tls,
                        serverHostname: serverHostname
                    )
                } catch { throw ValidationError(error.message) }
            }
            return .external(
                endpoints: [.production: try endpoint(production), .sandbox: try endpoint(sandbox ?? production)],
                defaultIdentity: try credential.map(load),
                identities: try tenantCredentials()
            )
        case let other:
            throw ValidationError("apns.mode must be simulator, apple, external or disabled, not \(other)")
        }
    }

    private func tenantCredentials() throws -> [TenantID: APNsCredential] {
        var result: [TenantID: APNsCredential] = [:]
        for (name, credential) in tenants ?? [:] {
            result[try parseTenant(name)] = try load(credential)
        }
        return result
    }

    private func load(_ credential: Credential) throws -> APNsCredential {
        if let teamID = credential.teamID, let keyID = credential.keyID, let keyFile = credential.keyFile {
            guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                throw ValidationError("cannot read the APNs key file \(keyFile)")
            }
            do {
                return .token(try APNsSigningIdentity(teamID: teamID, keyID: keyID, p8: pem))
            } catch {
                throw ValidationError("\(keyFile) is not a P-256 .p8 key")
            }
        }
        do {
            if let pkcs12 = credential.pkcs12 {
                let tls = try APNsCertificate.tls(pkcs12: pkcs12, passphrase: credential.passphrase ?? "")
                return .certificate(chain: tls.certificateChain, key: try unwrap(tls.privateKey))
            }
            if let certificate = credential.certificate, let privateKey = credential.privateKey {
                let tls = try APNsCertificate.tls(certificatePEM: certificate, privateKeyPEM: privateKey)
                return .certificate(chain: tls.certificateChain, key: try unwrap(tls.privateKey))
            }
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("cannot load the APNs client certificate: \(error)")
        }
        throw ValidationError(
            "an APNs credential needs teamID, keyID and keyFile, or certificate and privateKey, or pkcs12"
        )
    }

    private func unwrap(_ key: NIOSSLPrivateKeySource?) throws -> NIOSSLPrivateKeySource {
        guard let key else { throw ValidationError("the APNs certificate has no private key") }
        return key
    }
}
