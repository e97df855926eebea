import ArgumentParser
import Crypto
import Engine
import Foundation
import Gateway
import Logging
import NIOSSL
import ServiceLifecycle

/// `broker apns-simulator` (also `broker fcm-simulator`): the push simulator as its own process, speaking APNs
/// and FCM on one listener.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-simulator",
        abstract: "Run a faithful APNs provider API and FCM HTTP v1 simulator (TLS + HTTP/2, with or without ALPN).",
        discussion: """
            APNs: POST /3/device/{token}. FCM: POST /token (Google's OAuth2 JWT-bearer exchange, for the service
            accounts given with --fcm-account or PUT /_simulator/fcm/accounts/{client_email}) and
            POST /v1/projects/{project}/messages:send.
            Control API on the same listener: GET/DELETE /_simulator/accepted, GET/DELETE /_simulator/fcm/accepted,
            PUT /_simulator/faults, PUT /_simulator/tokens/{token}, PUT /_simulator/stream-limit,
            POST /_simulator/goaway, PUT /_simulator/fcm/accounts/{client_email}. Each control request needs
            Authorization: Bearer <token>, the token from BROKER_SIMULATOR_CONTROL_TOKEN or, without it, one
            generated at start and printed once.
            """,
        aliases: ["fcm-simulator"]
    )

    @OptionGroup var common: CommonOptions

    @Option(help: "Listen address host:port.")
    var listen = "127.0.0.1:2197"

    @Option(help: "A provider-token key as KEYID=path to its .p8 private key or PEM public key (repeatable).")
    var key: [String] = []

    @Option(help: "An FCM service account's JSON key file whose assertions the token endpoint takes (repeatable).")
    var fcmAccount: [String] = []

    @Option(help: "An accepted apns-topic (repeatable); any topic when none is given.")
    var topic: [String] = []

    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS once a token is accepted.")
    var maxStreams: UInt32 = 1000

    @Flag(help: "Answer 200 to everything with minimal work (for load tests of a sender).")
    var benchmark = false

    @Flag(help: "Serve cleartext HTTP/2 with prior knowledge instead of TLS (for local load tools).")
    var plaintext = false

    @Flag(help: "Turn the control API (/_simulator/) off.")
    var noControl = false

    func run() async throws {
        let settings = try BrokerSettings(options: common)
        let logger = bootstrapLogging(settings.logLevel)
        let address: ListenAddress
        do { address = try ListenAddress(parsing: listen) } catch { throw ValidationError(error.message) }
        var keys: [String: P256.Signing.PublicKey] = [:]
        for entry in key {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let pem = try? String(contentsOfFile: parts[1], encoding: .utf8) else {
                throw ValidationError("--key takes KEYID=path, and the file must be readable: \(entry)")
            }
            if let privateKey = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                keys[parts[0]] = privateKey.publicKey
            } else if let publicKey = try? P256.Signing.PublicKey(pemRepresentation: pem) {
                keys[parts[0]] = publicKey
            } else {
                throw ValidationError("\(parts[1]) holds no P-256 key in PEM form")
            }
        }
        var accounts: [String: FCMSimulatedAccount] = [:]
        for file in fcmAccount {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read the FCM service account key \(file)")
            }
            do {
                let account = try FCMServiceAccount(json: data)
                accounts[account.clientEmail] = FCMSimulatedAccount(
                    projectID: account.projectID,
                    publicKey: account.publicKey
                )
            } catch {
                throw ValidationError("\(file): \(error)")
            }
        }
        var tls: TLSConfiguration?
        if !plaintext {
            try FileManager.default.createDirectory(atPath: settings.dataDirectory, withIntermediateDirectories: true)
            let files = try TLSFiles.configuredOrSelfSigned(
                certificatePath: settings.tlsCertificate,
                privateKeyPath: settings.tlsPrivateKey,
                directory: settings.dataDirectory,
                hostnames: settings.tlsHostnames,
                logger: logger
            )
            tls = try files.serverConfiguration()
        }
        var controlToken: String?
        var generated = false
        if !noControl {
            let given: String
            do throws(EngineError) {
                given =
                    try BrokerSettings.secret(
                        "BROKER_SIMULATOR_CONTROL_TOKEN",
                        environment: ProcessInfo.processInfo.environment,
                        file: nil,
                        what: "simulator control token"
                    ) ?? ""
            } catch { throw ValidationError(error.message) }
            guard given.isEmpty || (16...200).contains(given.utf8.count) else {
                throw ValidationError("BROKER_SIMULATOR_CONTROL_TOKEN must be 16-200 characters")
            }
            generated = given.isEmpty
            controlToken = given.isEmpty ? Demo.randomToken() : given
        }
        let limits = OpenFileLimit.fitted(
            settings.connectionLimits,
            softLimit: OpenFileLimit.raise(logger: logger),
            logger: logger
        )
        let simulator = APNsSimulator(
            configuration: APNsSimulatorConfiguration(
                host: address.host,
                port: address.port,
                tls: tls,
                maxConcurrentStreams: maxStreams,
                keys: keys,
                allowedTopics: topic.isEmpty ? nil : Set(topic),
                benchmarkMode: benchmark,
                controlToken: controlToken,
                connectionLimits: limits,
                fcmAccounts: accounts
            )
        )
        let port = try await simulator.start()
        let scheme = plaintext ? "http" : "https"
        FileHandle.standardOutput.write(
            Data(
                """
                FCM simulator on the same listener: \(accounts.count) service account(s), token endpoint \(scheme)://\(address.host):\(port)/token.
                APNs simulator on \(scheme)://\(address.host):\(port) (\(keys.isEmpty ? "no provider-token keys: certificate mode" : "\(keys.count) key(s)")\
                \(benchmark ? ", benchmark mode" : "")). Accepted pushes: \(scheme)://\(address.host):\(port)/_simulator/accepted\
                \(controlToken == nil ? "" : " and /_simulator/fcm/accepted")\
                \(controlToken == nil ? " (control API off)" : "")
                \(generated ? "Control token (shown once): \(controlToken ?? "")\n" : "")

                """.utf8
            )
        )
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: SimulatorService(simulator: simulator))],
                gracefulShutdownSignals: [.sigterm, .sigint],
                cancellationSignals: [],
                logger: logger
            )
        )
        try await group.run()
    }
}

/// Keeps the simulator up until shutdown.
struct SimulatorService: Service {
    let simulator: APNsSimulator

    func run() async throws {
        try? await gracefulShutdown()
        await simulator.stop()
    }
}
