import ArgumentParser
import Engine
import Foundation
import Gateway
import NIOSSL

/// The `fcm` member of the configuration file: where Android pushes go.
struct FCMFileSettings: Decodable {
    /// `simulator` (the in-process simulator's FCM side; the default when APNs uses the simulator), `google`,
    /// `external` (another host, such as `broker apns-simulator`), or `disabled` (the default otherwise).
    var mode: String?
    /// `host:port` of FCM's HTTP v1 API for `external`.
    var endpoint: String?
    /// A PEM file of extra trust roots (an external simulator's certificate), for the API and the token endpoint.
    var trustRoots: String?
    /// The name the server certificate is checked against (default: the host).
    var serverHostname: String?
    /// Where access tokens are exchanged in mode `external`: `https://<endpoint>/token` (the simulator's) unless
    /// given; mode `google` uses each key file's own `token_uri`.
    var tokenURI: String?
    /// The default service account's JSON key file, and per-tenant ones.
    var serviceAccount: String?
    var tenants: [String: String]?

    /// The settings with those the environment gives: `BROKER_FCM_MODE`, `BROKER_FCM_ENDPOINT`,
    /// `BROKER_FCM_TRUST_ROOTS`, `BROKER_FCM_SERVER_HOSTNAME`, `BROKER_FCM_TOKEN_URI` and
    /// `BROKER_FCM_SERVICE_ACCOUNT` (a key file).
    func overridden(by environment: [String: String]) -> FCMFileSettings {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        var settings = self
        settings.mode = value("BROKER_FCM_MODE") ?? mode
        settings.endpoint = value("BROKER_FCM_ENDPOINT") ?? endpoint
        settings.trustRoots = value("BROKER_FCM_TRUST_ROOTS") ?? trustRoots
        settings.serverHostname = value("BROKER_FCM_SERVER_HOSTNAME") ?? serverHostname
        settings.serviceAccount = value("BROKER_FCM_SERVICE_ACCOUNT") ?? serviceAccount
        settings.tokenURI = value("BROKER_FCM_TOKEN_URI") ?? tokenURI
        return settings
    }

    func setup(apnsEmbedded: Bool) throws -> FCMSetup {
        switch mode ?? (apnsEmbedded ? "simulator" : "disabled") {
        case "simulator": return .embeddedSimulator
        case "disabled": return .disabled
        case "google":
            return .external(
                endpoint: .fcm,
                defaultAccount: try serviceAccount.map { try load($0) },
                accounts: try tenantAccounts(tokenURI: nil)
            )
        case "external":
            guard let endpoint else { throw ValidationError("fcm.endpoint (host:port) is required for mode external") }
            var tls = TLSConfiguration.makeClientConfiguration()
            if let trustRoots { tls.trustRoots = .file(trustRoots) }
            let address: ListenAddress
            do { address = try ListenAddress(parsing: endpoint) } catch { throw ValidationError(error.message) }
            let given = tokenURI ?? "https://\(address.host):\(address.port)/token"
            guard let exchange = URL(string: given), exchange.scheme == "https", exchange.host != nil else {
                throw ValidationError("fcm.tokenURI must be an https URL, not \(given)")
            }
            return .external(
                endpoint: PushEndpoint(
                    host: address.host,
                    port: address.port,
                    tls: tls,
                    serverHostname: serverHostname
                ),
                defaultAccount: try serviceAccount.map { try load($0, tokenURI: exchange) },
                accounts: try tenantAccounts(tokenURI: exchange),
                tokenURI: exchange
            )
        case let other:
            throw ValidationError("fcm.mode must be simulator, google, external or disabled, not \(other)")
        }
    }

    private func tenantAccounts(tokenURI: URL?) throws -> [TenantID: FCMServiceAccount] {
        var result: [TenantID: FCMServiceAccount] = [:]
        for (name, file) in tenants ?? [:] { result[try parseTenant(name)] = try load(file, tokenURI: tokenURI) }
        return result
    }

    /// A key file; `tokenURI` in place of its own `token_uri` (mode external).
    private func load(_ file: String, tokenURI: URL? = nil) throws -> FCMServiceAccount {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError("cannot read the FCM service account key \(file)")
        }
        do {
            var account = try FCMServiceAccount(json: data)
            if let tokenURI { account.tokenURI = tokenURI }
            return account
        } catch {
            throw ValidationError("\(file): \(error)")
        }
    }
}
