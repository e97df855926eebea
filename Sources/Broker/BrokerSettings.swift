import ArgumentParser
import Engine
import Foundation
import Gateway
import Logging

/// Options every command takes: where the configuration and the data live.
struct CommonOptions: ParsableArguments {
    @Option(help: "JSON configuration file (env BROKER_CONFIG).")
    var config: String?

    @Option(help: "Data directory: database, generated certificate, media (env BROKER_DATA_DIR; default ./data).")
    var dataDir: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error (env BROKER_LOG_LEVEL; default info).")
    var logLevel: String?

    @Flag(
        help: """
            Apply the migrations the store lacks before starting (env BROKER_MIGRATE=on). Without it a store that \
            lacks migrations is refused with their names; `broker migrate` applies them.
            """
    )
    var migrate = false
}

/// The configuration file's shape. Every member is optional; see the README's configuration table.
struct ConfigFile: Decodable {
    var dataDirectory: String?
    var database: String?
    var migrate: Bool?
    var databasePasswordFile: String?
    var listen: String?
    var plainListen: String?
    var tlsCertificate: String?
    var tlsPrivateKey: String?
    var tlsHostnames: [String]?
    var defaultTenant: String?
    var publicBaseURL: String?
    var maxBodyBytes: Int?
    var maxUploadBytes: Int?
    var uploadDeadlineSeconds: Int?
    var mediaQuotaBytes: Int?
    var credentialKeyFile: String?
    var credentialCacheSeconds: Int?
    var bcryptCost: Int?
    var logLevel: String?
    var apns: APNsFileSettings?
    var fcm: FCMFileSettings?
    var scheduler: Bool?
    var stalenessSeconds: Int?
    var spreadSeconds: Int?
    var sweepSeconds: Int?
    var dispatchBatchSize: Int?
    var claimSeconds: Int?
    var leaseSeconds: Int?
    var heartbeatSeconds: Int?
    var nodeSilenceSeconds: Int?
    var repeatDays: Int?
    var shutdownGraceSeconds: Int?
    var pushesInFlight: Int?
    var pushGiveUpSeconds: Int?
    var sweepShare: Int?
    var pushBatchSize: Int?
    var adminListen: String?
    var adminToken: String?
    var adminTokenFile: String?
    var operatorTokenFile: String?
    var maxConnections: Int?
    var maxConnectionsPerAddress: Int?
    var handshakeTimeoutSeconds: Int?
    var firstRequestTimeoutSeconds: Int?
    var stallTimeoutSeconds: Int?
    var requestDeadlineSeconds: Int?
    var bodyDeadlineSeconds: Int?
    var loginAddressLimit: Int?
    var loginAddressLeakSeconds: Int?
    var trustedProxies: [String]?
    var proxyProtocol: Bool?
    var maxRequestsInFlight: Int?
    var maxRequestsInFlightPerTenant: Int?
    var webhookPrivateAddresses: Bool?
    var webhookTrustRootsFile: String?
    var webhookTimeoutSeconds: Int?
}

/// Resolved settings: flags win over environment variables, which win over the file, which wins over defaults.
struct BrokerSettings {
    var dataDirectory: String
    var database: DatabaseSetting
    /// Whether opening the store applies the migrations it lacks (otherwise only an empty store gets its schema).
    var migrations: MigrationPolicy
    var listen: ListenAddress
    var plainListen: ListenAddress?
    var tlsCertificate: String?
    var tlsPrivateKey: String?
    var tlsHostnames: [String]
    var defaultTenant: TenantID?
    var publicBaseURL: String?
    var maxBodyBytes: Int
    var maxUploadBytes: Int
    var uploadDeadlineSeconds: Int
    var mediaQuotaBytes: Int
    var credentialKey: [UInt8]?
    var credentialCacheSeconds: Int
    var bcryptCost: UInt8
    var logLevel: Logger.Level
    var apns: APNsSetup
    var fcm: FCMSetup
    var scheduler: SchedulerConfiguration?
    var shutdownGraceSeconds: Int
    var push: PushGatewayConfiguration
    var admin: AdminConfiguration?
    var connectionLimits: ConnectionLimits
    var requestDeadlineSeconds: Int
    var bodyDeadlineSeconds: Int
    var loginAddressLimit: Int
    var loginAddressLeakSeconds: Int
    var trustedProxies: [NetworkRange]
    var proxyProtocol: Bool
    var admission: AdmissionLimits
    var operatorToken: String?
    var webhooks: WebhookConfiguration

    init(options: CommonOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        var file = ConfigFile()
        if let path = options.config ?? environment["BROKER_CONFIG"] {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read configuration file \(path)")
            }
            do {
                file = try JSONDecoder().decode(ConfigFile.self, from: data)
            } catch let error as DecodingError {
                throw ValidationError("configuration file \(path): \(CatalogImport.describe(error))")
            }
        }
        func pick(_ flag: String?, _ env: String, _ fileValue: String?) -> String? {
            flag ?? environment[env].flatMap { $0.isEmpty ? nil : $0 } ?? fileValue
        }
        func number(_ env: String, _ fileValue: Int?, _ fallback: Int, _ range: ClosedRange<Int>) throws -> Int {
            let value =
                try environment[env].map { text in
                    guard let value = Int(text) else { throw ValidationError("\(env) must be an integer") }
                    return value
                } ?? fileValue ?? fallback
            guard range.contains(value) else { throw ValidationError("\(env) must be within \(range)") }
            return value
        }
        do throws(EngineError) {
            dataDirectory = pick(options.dataDir, "BROKER_DATA_DIR", file.dataDirectory) ?? "./data"
            database = try DatabaseSetting(
                pick(nil, "BROKER_DATABASE", file.database) ?? dataDirectory + "/broker.sqlite",
                password: try Self.databasePassword(environment: environment, file: file)
            )
            listen = try ListenAddress(parsing: pick(nil, "BROKER_LISTEN", file.listen) ?? "0.0.0.0:8443")
            plainListen = try pick(nil, "BROKER_PLAIN_LISTEN", file.plainListen).map { (text) throws(EngineError) in
                try ListenAddress(parsing: text)
            }
            tlsCertificate = pick(nil, "BROKER_TLS_CERTIFICATE", file.tlsCertificate)
            tlsPrivateKey = pick(nil, "BROKER_TLS_PRIVATE_KEY", file.tlsPrivateKey)
            tlsHostnames =
                pick(nil, "BROKER_TLS_HOSTNAMES", nil)?.split(separator: ",").map(String.init)
                ?? file.tlsHostnames ?? ["localhost"]
            defaultTenant = try pick(nil, "BROKER_DEFAULT_TENANT", file.defaultTenant).map {
                (text) throws(EngineError) in
                try TenantID(text)
            }
        } catch {
            throw ValidationError(error.message)
        }
        guard (tlsCertificate == nil) == (tlsPrivateKey == nil) else {
            throw ValidationError("set both tlsCertificate and tlsPrivateKey, or neither (for a self-signed pair)")
        }
        publicBaseURL = pick(nil, "BROKER_PUBLIC_URL", file.publicBaseURL)
        maxBodyBytes = try number("BROKER_MAX_BODY_BYTES", file.maxBodyBytes, 64 * 1024, 1024...(16 << 20))
        maxUploadBytes = try number("BROKER_MAX_UPLOAD_BYTES", file.maxUploadBytes, 64 << 20, (1 << 20)...(1 << 30))
        uploadDeadlineSeconds = try number(
            "BROKER_UPLOAD_DEADLINE_SECONDS",
            file.uploadDeadlineSeconds,
            900,
            10...3600
        )
        credentialKey = try Self.credentialKey(
            environment["BROKER_CREDENTIAL_KEY"],
            file: environment["BROKER_CREDENTIAL_KEY_FILE"] ?? file.credentialKeyFile
        )
        mediaQuotaBytes = try number("BROKER_MEDIA_QUOTA_BYTES", file.mediaQuotaBytes, 1 << 30, 0...(1 << 50))
        credentialCacheSeconds = try number(
            "BROKER_CREDENTIAL_CACHE_SECONDS",
            file.credentialCacheSeconds,
            300,
            0...86_400
        )
        bcryptCost = UInt8(try number("BROKER_BCRYPT_COST", file.bcryptCost, 12, 4...31))
        requestDeadlineSeconds = try number(
            "BROKER_REQUEST_DEADLINE_SECONDS",
            file.requestDeadlineSeconds,
            10,
            1...300
        )
        bodyDeadlineSeconds = try number(
            "BROKER_BODY_DEADLINE_SECONDS",
            file.bodyDeadlineSeconds,
            30,
            1...600
        )
        loginAddressLimit = try number("BROKER_LOGIN_ADDRESS_LIMIT", file.loginAddressLimit, 30, 3...1_000_000)
        loginAddressLeakSeconds = try number(
            "BROKER_LOGIN_ADDRESS_LEAK_SECONDS",
            file.loginAddressLeakSeconds,
            2,
            1...3600
        )
        let proxies =
            environment["BROKER_TRUSTED_PROXIES"].map { $0.split(separator: ",").map(String.init) }
            ?? file.trustedProxies ?? []
        trustedProxies = try proxies.map { text in
            let text = text.trimmingCharacters(in: .whitespaces)
            guard let range = NetworkRange(cidr: text) else {
                throw ValidationError("trustedProxies: '\(text)' is not an address or a CIDR range")
            }
            return range
        }
        let proxyFlag = environment["BROKER_PROXY_PROTOCOL"].flatMap { $0.isEmpty ? nil : $0 }
        guard proxyFlag == nil || ["on", "off"].contains(proxyFlag) else {
            throw ValidationError("BROKER_PROXY_PROTOCOL must be on or off")
        }
        proxyProtocol = proxyFlag.map { $0 == "on" } ?? file.proxyProtocol ?? false
        if proxyProtocol, trustedProxies.isEmpty {
            throw ValidationError(
                "proxyProtocol needs trustedProxies: the addresses of the load balancers that send the header (from"
                    + " anyone else it would let a client name any address)"
            )
        }
        let nodeRequests = try number(
            "BROKER_MAX_REQUESTS_IN_FLIGHT",
            file.maxRequestsInFlight,
            AdmissionLimits().node,
            1...1_000_000
        )
        let tenantRequests = try number(
            "BROKER_MAX_REQUESTS_IN_FLIGHT_PER_TENANT",
            file.maxRequestsInFlightPerTenant,
            min(AdmissionLimits().perTenant, nodeRequests),
            1...1_000_000
        )
        guard tenantRequests <= nodeRequests else {
            throw ValidationError("maxRequestsInFlightPerTenant must not exceed maxRequestsInFlight")
        }
        admission = AdmissionLimits(node: nodeRequests, perTenant: tenantRequests)
        if case .postgres(var shared) = database {
            shared.claimTime = .seconds(try number("BROKER_CLAIM_SECONDS", file.claimSeconds, 120, 5...3600))
            shared.leaseTime = .seconds(try number("BROKER_LEASE_SECONDS", file.leaseSeconds, 60, 5...3600))
            let heartbeat = try number("BROKER_HEARTBEAT_SECONDS", file.heartbeatSeconds, 3, 1...60)
            let silence = try number("BROKER_NODE_SILENCE_SECONDS", file.nodeSilenceSeconds, 10, 3...3600)
            guard silence >= 2 * heartbeat else {
                throw ValidationError(
                    "nodeSilenceSeconds (\(silence)) must be at least twice heartbeatSeconds (\(heartbeat))"
                )
            }
            shared.heartbeatInterval = .seconds(heartbeat)
            shared.nodeSilence = .seconds(silence)
            database = .postgres(shared)
        }
        let level = pick(options.logLevel, "BROKER_LOG_LEVEL", file.logLevel) ?? "info"
        guard let parsed = Logger.Level(rawValue: level) else { throw ValidationError("unknown log level '\(level)'") }
        logLevel = parsed
        let migrateFlag = environment["BROKER_MIGRATE"].flatMap { $0.isEmpty ? nil : $0 }
        guard migrateFlag == nil || ["on", "off"].contains(migrateFlag) else {
            throw ValidationError("BROKER_MIGRATE must be on or off")
        }
        migrations =
            options.migrate || (migrateFlag.map { $0 == "on" } ?? file.migrate ?? false) ? .apply : .refusePending
        let schedulerFlag = environment["BROKER_SCHEDULER"].flatMap { $0.isEmpty ? nil : $0 }
        guard schedulerFlag == nil || ["on", "off"].contains(schedulerFlag) else {
            throw ValidationError("BROKER_SCHEDULER must be on or off")
        }
        if schedulerFlag.map({ $0 == "on" }) ?? file.scheduler ?? true {
            scheduler = SchedulerConfiguration(
                batchSize: try number("BROKER_DISPATCH_BATCH", file.dispatchBatchSize, 500, 1...20_000),
                staleness: .seconds(
                    try number("BROKER_STALENESS_SECONDS", file.stalenessSeconds, 43_200, 60...604_800)
                ),
                spreadWindow: .seconds(try number("BROKER_SPREAD_SECONDS", file.spreadSeconds, 300, 0...3600)),
                repeatWindowDays: try number("BROKER_REPEAT_DAYS", file.repeatDays, 30, 0...3650),
                sweepInterval: .seconds(try number("BROKER_SWEEP_SECONDS", file.sweepSeconds, 60, 1...3600)),
                sweepShare: try number("BROKER_SWEEP_SHARE", file.sweepShare, 5000, 1...1_000_000)
            )
        } else {
            scheduler = nil
        }
        let adminListen = pick(nil, "BROKER_ADMIN_LISTEN", file.adminListen) ?? "127.0.0.1:9090"
        if adminListen == "off" {
            admin = nil
        } else {
            let token: String?
            do throws(EngineError) {
                token =
                    try Self.secret(
                        "BROKER_ADMIN_TOKEN",
                        environment: environment,
                        file: file.adminTokenFile,
                        what: "admin token"
                    ) ?? file.adminToken
            } catch { throw ValidationError(error.message) }
            do {
                admin = AdminConfiguration(listen: try ListenAddress(parsing: adminListen), token: token)
            } catch {
                throw ValidationError("adminListen: \(error.message)")
            }
        }
        shutdownGraceSeconds = try number("BROKER_SHUTDOWN_GRACE_SECONDS", file.shutdownGraceSeconds, 20, 1...600)
        let defaults = PushGatewayConfiguration()
        let inFlight = try number("BROKER_PUSHES_IN_FLIGHT", file.pushesInFlight, defaults.workers, 1...100_000)
        let batch = try number("BROKER_PUSH_BATCH", file.pushBatchSize, defaults.batchSize, 1...1000)
        guard batch <= inFlight else {
            throw ValidationError("pushBatchSize (\(batch)) must not exceed pushesInFlight (\(inFlight))")
        }
        push = PushGatewayConfiguration(
            workers: inFlight,
            batchSize: batch,
            givingUpAfter: .seconds(try number("BROKER_PUSH_GIVE_UP_SECONDS", file.pushGiveUpSeconds, 60, 1...3600))
        )
        connectionLimits = ConnectionLimits(
            maxConnections: try number("BROKER_MAX_CONNECTIONS", file.maxConnections, 10_000, 1...1_000_000),
            maxConnectionsPerAddress: try number(
                "BROKER_MAX_CONNECTIONS_PER_ADDRESS",
                file.maxConnectionsPerAddress,
                1_000,
                1...1_000_000
            ),
            handshakeTimeout: .seconds(
                try number("BROKER_HANDSHAKE_TIMEOUT_SECONDS", file.handshakeTimeoutSeconds, 10, 1...300)
            ),
            firstRequestTimeout: .seconds(
                try number("BROKER_FIRST_REQUEST_TIMEOUT_SECONDS", file.firstRequestTimeoutSeconds, 30, 1...600)
            ),
            stallTimeout: .seconds(try number("BROKER_STALL_TIMEOUT_SECONDS", file.stallTimeoutSeconds, 30, 1...3600))
        )
        let privateAddresses = environment["BROKER_WEBHOOK_PRIVATE_ADDRESSES"].flatMap { $0.isEmpty ? nil : $0 }
        guard privateAddresses == nil || ["on", "off"].contains(privateAddresses) else {
            throw ValidationError("BROKER_WEBHOOK_PRIVATE_ADDRESSES must be on or off")
        }
        let trustRoots = pick(nil, "BROKER_WEBHOOK_TRUST_ROOTS_FILE", file.webhookTrustRootsFile)
        if let trustRoots, !FileManager.default.isReadableFile(atPath: trustRoots) {
            throw ValidationError("cannot read the webhook trust roots file \(trustRoots)")
        }
        webhooks = WebhookConfiguration(
            policy: WebhookTargetPolicy(
                allowPrivateAddresses: privateAddresses.map { $0 == "on" } ?? file.webhookPrivateAddresses ?? false
            ),
            trustRootsFile: trustRoots,
            timeout: .seconds(try number("BROKER_WEBHOOK_TIMEOUT_SECONDS", file.webhookTimeoutSeconds, 10, 1...120))
        )
        apns = try (file.apns ?? APNsFileSettings()).overridden(by: environment).setup()
        let apnsEmbedded: Bool = if case .embeddedSimulator = apns { true } else { false }
        fcm = try (file.fcm ?? FCMFileSettings()).overridden(by: environment).setup(apnsEmbedded: apnsEmbedded)
        do throws(EngineError) {
            operatorToken = try Self.secret(
                "BROKER_OPERATOR_TOKEN",
                environment: environment,
                file: file.operatorTokenFile,
                what: "operator token"
            )
        } catch { throw ValidationError(error.message) }
        if let operatorToken, !(32...512).contains(operatorToken.utf8.count) {
            throw ValidationError("the operator token must be 32-512 bytes")
        }
    }

    /// The server's configuration; with `logger`, the process's open-file limit is raised first and the
    /// connection limit fitted to it.
    func serverConfiguration(logger: Logger? = nil) -> ServerConfiguration {
        var limits = connectionLimits
        if let logger {
            limits = OpenFileLimit.fitted(limits, softLimit: OpenFileLimit.raise(logger: logger), logger: logger)
        }
        var configuration = ServerConfiguration(
            dataDirectory: dataDirectory,
            listen: listen,
            plainListen: plainListen,
            tlsCertificatePath: tlsCertificate,
            tlsPrivateKeyPath: tlsPrivateKey,
            selfSignedHostnames: tlsHostnames,
            defaultTenant: defaultTenant,
            connectionLimits: limits,
            shutdownGracePeriod: .seconds(shutdownGraceSeconds),
            rest: RESTConfiguration(
                publicBaseURL: publicBaseURL,
                maxBodySize: maxBodyBytes,
                maxUploadSize: maxUploadBytes,
                uploadDeadline: .seconds(uploadDeadlineSeconds),
                credentialCacheTTL: .seconds(credentialCacheSeconds),
                mediaDirectory: dataDirectory + "/media",
                mediaQuota: mediaQuotaBytes,
                bcryptCost: bcryptCost,
                requestDeadline: .seconds(requestDeadlineSeconds),
                bodyDeadline: .seconds(bodyDeadlineSeconds),
                admission: admission,
                operatorToken: operatorToken
            ),
            apns: apns,
            push: push,
            scheduler: scheduler,
            admin: admin
        )
        configuration.credentialKey = credentialKey
        configuration.fcm = fcm
        configuration.webhooks = webhooks
        configuration.rest.trustedProxies = trustedProxies
        configuration.rest.proxyProtocol = proxyProtocol
        configuration.rest.loginAddressLimit = loginAddressLimit
        configuration.rest.loginAddressLeak = .seconds(loginAddressLeakSeconds)
        return configuration
    }

    /// Opens the store, creating the data directory on first use: the SQLite file, or the PostgreSQL database
    /// when `database` is a `postgres://` URL.
    func openStore(logger: Logger, metrics: BrokerMetrics = .disabled) async throws -> any BrokerStore {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dataDirectory + "/media", withIntermediateDirectories: true)
        switch database {
        case .sqlite(let path):
            return try await SQLiteStore(
                configuration: .init(path: path, migrations: migrations),
                logger: logger,
                metrics: metrics
            )
        case .postgres(var configuration):
            configuration.migrations = migrations
            logger.info("opening the PostgreSQL store", metadata: ["database": "\(configuration.redacted)"])
            return try await PostgresStore(configuration: configuration, logger: logger, metrics: metrics)
        }
    }
}

extension BrokerSettings {
    /// Whether pushes go to the in-process APNs simulator (the embedded default).
    var apnsIsEmbedded: Bool {
        if case .embeddedSimulator = apns { return true }
        return false
    }
}

extension BrokerSettings {
    /// The key uploaded APNs credentials are sealed with: 32 bytes in base64, given in the environment or as the
    /// first line of a file.
    static func credentialKey(_ text: String?, file: String?) throws -> [UInt8]? {
        var encoded = text.flatMap { $0.isEmpty ? nil : $0 }
        if encoded == nil, let file, !file.isEmpty {
            guard let content = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ValidationError("cannot read the credential key file \(file)")
            }
            encoded = content.split(whereSeparator: \.isNewline).first.map(String.init)
        }
        guard let encoded else { return nil }
        guard let key = Data(base64Encoded: encoded.trimmingCharacters(in: .whitespaces)), key.count == 32 else {
            throw ValidationError("the credential key is 32 bytes in base64 (openssl rand -base64 32)")
        }
        return Array(key)
    }
}
