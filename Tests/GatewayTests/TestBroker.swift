import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import TestSupport
import Testing

/// Users and passwords the fixtures create. Alice's password holds every character the original app had trouble with.
enum Fixture {
    static let acme = try! TenantID("acme")
    static let globex = try! TenantID("globex")
    static let alicePassword = "pä:ss%&wörd ✓"
    static let bobPassword = "bob-pass"
    static let globexAlicePassword = "globex-secret"
    static let carolPassword = "carol-pass"
    static let rootPassword = "root-<pass>"
    /// The admin API's operator token in every test broker.
    static let operatorToken = "operator-token-of-the-tests-0123456789"
    /// The key uploaded APNs credentials are sealed with.
    static let credentialKey: [UInt8] = Array(repeating: 7, count: 32)
    /// Alice gets twelve impulses, `acme-1` (oldest) to `acme-12` (newest).
    static let aliceDeliveries = 12

    static func impulse(_ tenant: TenantID, _ id: String, single: Bool = true) throws -> Impulse {
        try Impulse(
            tenant: tenant,
            id: ImpulseID(id),
            language: "EN",
            title: "Title \(id)",
            descriptionShort: "Short \(id)",
            description: "Full text of \(id)",
            durationMinutes: 5,
            action: .do,
            single: single,
            imageURLs: ["/media/\(tenant)/\(id).jpg", "https://cdn.example.com/\(id).png"],
            videoURL: nil,
            webURL: "https://example.com/\(id)",
            lifeArea: .health,
            series: single ? nil : "s",
            seriesPosition: single ? nil : 1
        )
    }

    /// Two tenants; in each an `alice` with a different password; acme also has bob and the disabled carol.
    static func seed(_ store: any BrokerStore) async throws {
        try await store.createTenant(try Tenant(id: acme, name: "Acme", apnsTopic: "com.acme.impulse"))
        try await store.createTenant(
            try Tenant(id: globex, name: "Globex", defaultLanguage: "DE", apnsTopic: "com.globex.impulse")
        )
        let alice = try await addUser(store, acme, "alice", alicePassword)
        _ = try await addUser(store, acme, "bob", bobPassword)
        _ = try await addUser(store, acme, "carol", carolPassword)
        let rootHash = try await Authenticator.hash(rootPassword, cost: 4)
        _ = try await store.createUser(
            try NewUser(tenant: acme, username: "root", passwordHash: rootHash, isAdmin: true)
        )
        _ = try await store.setEnabled(tenant: acme, username: "carol", enabled: false)
        let globexAlice = try await addUser(store, globex, "alice", globexAlicePassword)
        _ = try await store.importImpulses(
            try (1...aliceDeliveries).map { try impulse(acme, "acme-\($0)") },
            tenant: acme
        )
        _ = try await store.importImpulses([try impulse(globex, "secret-1")], tenant: globex)
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        _ = try await store.recordDeliveries(
            try (1...aliceDeliveries).map {
                NewDelivery(
                    tenant: acme,
                    user: alice.id,
                    impulse: try ImpulseID("acme-\($0)"),
                    kind: .manual,
                    assignedAt: start.addingTimeInterval(Double($0) * 86_400)
                )
            }
        )
        _ = try await store.recordDeliveries([
            NewDelivery(
                tenant: globex,
                user: globexAlice.id,
                impulse: try ImpulseID("secret-1"),
                kind: .manual,
                assignedAt: start
            )
        ])
    }

    @discardableResult
    static func addUser(
        _ store: any BrokerStore,
        _ tenant: TenantID,
        _ name: String,
        _ password: String
    ) async throws -> User {
        let hash = try await Authenticator.hash(password, cost: 4)
        return try await store.createUser(try NewUser(tenant: tenant, username: name, passwordHash: hash))
    }
}

/// The store a test broker runs on: a SQLite file in its folder, or a new database on the PostgreSQL test cluster
/// (the same two kinds the shared store tests run on).
typealias TestDatabase = StoreKind

/// A broker running in-process on loopback ports, with an HTTP client that trusts its generated certificate.
struct TestBroker: Sendable {
    let directory: String
    let store: any BrokerStore
    let application: BrokerApplication
    let httpsPort: Int
    let plainPort: Int?
    let adminPort: Int?
    let client: HTTPClient
    let clientConfiguration: HTTPClient.Configuration

    static let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }()

    /// A new folder (with `media` inside), removed when the tests end.
    static func temporaryDirectory() -> String {
        TemporaryDirectories.make("impulse-broker-tests-", subfolders: ["media"])
    }

    /// Starts a broker (seeding a fresh store unless `directory` already holds one), runs `body`, and stops it.
    static func run(
        directory: String? = nil,
        database: TestDatabase = .sqlite,
        seed: Bool = true,
        plain: Bool = false,
        http1Only: Bool = false,
        maxBodySize: Int = 64 * 1024,
        maxUploadSize: Int = 64 << 20,
        mediaQuota: Int = 1 << 30,
        apns: APNsSetup = .embeddedSimulator(),
        fcm: FCMSetup = .disabled,
        credentialKey: [UInt8]? = Fixture.credentialKey,
        logger: Logger = TestBroker.logger,
        scheduler: SchedulerConfiguration? = nil,
        adminToken: String? = nil,
        shutdownGracePeriod: Duration = .seconds(20),
        // For a machine the whole suite loads (its first seconds start a hundred brokers on two cores): 10 s ran
        // out there for a broker's first requests. Tests of the deadline itself set their own.
        requestDeadline: Duration = .seconds(30),
        uploadDeadline: Duration = .seconds(900),
        bodyDeadline: Duration = .seconds(30),
        busyTimeout: Duration = .seconds(20),
        admission: AdmissionLimits = AdmissionLimits(),
        webhooks: WebhookConfiguration = WebhookConfiguration(),
        trustedProxies: [NetworkRange] = [],
        proxyProtocol: Bool = false,
        connectionLimits: ConnectionLimits = ConnectionLimits(),
        loginAddressLimit: Int? = nil,
        loginAddressLeak: Duration? = nil,
        clock: (any EngineClock)? = nil,
        tlsFiles: TLSFiles? = nil,
        tlsReloadInterval: Duration? = nil,
        _ body: @Sendable (TestBroker) async throws -> Void
    ) async throws {
        let directory = directory ?? temporaryDirectory()
        let store: any BrokerStore =
            switch database {
            case .sqlite:
                try await SQLiteStore(
                    configuration: .init(path: directory + "/broker.sqlite", busyTimeout: busyTimeout),
                    logger: logger
                )
            case .postgres:
                try await PostgresStore(
                    configuration: try PostgresStoreConfiguration(
                        url: try await PostgresTestDatabases.makeMigrated() + "?sslmode=disable&pool=8"
                    ),
                    logger: logger
                )
            }
        defer { Task { await store.close() } }
        if seed { try await Fixture.seed(store) }
        let (ports, continuation) = AsyncStream.makeStream(of: (Listener, Int).self)
        var configuration = ServerConfiguration(
            dataDirectory: directory,
            listen: ListenAddress(host: "127.0.0.1", port: 0),
            plainListen: plain ? ListenAddress(host: "127.0.0.1", port: 0) : nil,
            defaultTenant: Fixture.acme,
            changeFeedInterval: .milliseconds(20),
            shutdownGracePeriod: shutdownGracePeriod,
            // The fixture's users have hashes of cost 4, and so has the stand-in for unknown usernames.
            rest: RESTConfiguration(
                maxBodySize: maxBodySize,
                maxUploadSize: maxUploadSize,
                uploadDeadline: uploadDeadline,
                mediaDirectory: directory + "/media",
                mediaQuota: mediaQuota,
                bcryptCost: 4,
                requestDeadline: requestDeadline,
                bodyDeadline: bodyDeadline,
                admission: admission,
                operatorToken: Fixture.operatorToken
            ),
            // Off unless a test asks: the fixture's users would otherwise get today's impulse at start.
            scheduler: scheduler,
            admin: adminToken.map { AdminConfiguration(listen: ListenAddress(host: "127.0.0.1", port: 0), token: $0) }
        )
        configuration.apns = apns
        configuration.fcm = fcm
        configuration.webhooks = webhooks
        configuration.rest.trustedProxies = trustedProxies
        configuration.rest.proxyProtocol = proxyProtocol
        configuration.connectionLimits = connectionLimits
        if let loginAddressLimit { configuration.rest.loginAddressLimit = loginAddressLimit }
        if let loginAddressLeak { configuration.rest.loginAddressLeak = loginAddressLeak }
        if let clock { configuration.rest.clock = clock }
        configuration.credentialKey = credentialKey
        configuration.tlsCertificatePath = tlsFiles?.certificatePath
        configuration.tlsPrivateKeyPath = tlsFiles?.privateKeyPath
        if let tlsReloadInterval { configuration.tlsReloadInterval = tlsReloadInterval }
        // The whole suite on two cores (and a PostgreSQL server) can take more than the broker's 10 s to unwind a
        // cancelled service: ServiceLifecycle would stop the test process. CI once crashed so (stop 27).
        configuration.cancellationGracePeriod = .seconds(60)
        let application = try await buildApplication(configuration: configuration, store: store, logger: logger) {
            continuation.yield(($0, $1))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await application.run() }
            var bound: [Listener: Int] = [:]
            for await (listener, port) in ports {
                bound[listener] = port
                if bound.count == 1 + (plain ? 1 : 0) + (adminToken == nil ? 0 : 1) { break }
            }
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(tlsFiles?.certificatePath ?? directory + "/tls/self-signed.crt")
            // Redirects are answers to look at (the console's), not to follow.
            var clientConfiguration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
            clientConfiguration.httpVersion = http1Only ? .http1Only : .automatic
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
            let broker = TestBroker(
                directory: directory,
                store: store,
                application: application,
                httpsPort: bound[.https] ?? 0,
                plainPort: bound[.plain],
                adminPort: bound[.admin],
                client: client,
                clientConfiguration: clientConfiguration
            )
            do {
                try await body(broker)
            } catch {
                try await client.shutdown()
                group.cancelAll()
                throw error
            }
            try await client.shutdown()
            group.cancelAll()
        }
    }

    struct Reply: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data
        var version: HTTPVersion

        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// Sends one request over HTTPS (or the plain listener) and collects the reply.
    func send(
        _ method: HTTPMethod = .GET,
        _ path: String,
        user: String? = "alice",
        password: String? = nil,
        headers: [(String, String)] = [],
        body: String? = nil,
        bytes: [UInt8]? = nil,
        plain: Bool = false,
        // A deadline for a machine the whole suite loads, not a requirement on the broker's speed.
        timeout: TimeAmount = .seconds(60),
        // Another port in front of the HTTPS listener (a load balancer's).
        via port: Int? = nil
    ) async throws -> Reply {
        let base = plain ? "http://127.0.0.1:\(plainPort ?? 0)" : "https://127.0.0.1:\(port ?? httpsPort)"
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let user {
            let known = ["alice": Fixture.alicePassword, "bob": Fixture.bobPassword, "root": Fixture.rootPassword]
            let secret = password ?? known[user] ?? Fixture.carolPassword
            request.headers.add(
                name: "Authorization",
                value: "Basic " + Data("\(user):\(secret)".utf8).base64EncodedString()
            )
        }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        if let bytes { request.body = .bytes(ByteBuffer(bytes: bytes)) }
        let response = try await client.execute(request, timeout: timeout)
        let collected = try await response.body.collect(upTo: 16 << 20)
        return Reply(
            status: Int(response.status.code),
            headers: response.headers,
            body: Data(collected.readableBytesView),
            version: response.version
        )
    }
}

extension TestBroker {
    /// A plain HTTP/1.1 request to the operator listener (`/metrics`, `/inspect`).
    func admin(_ path: String, token: String? = nil) async throws -> Reply {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(adminPort ?? 0)\(path)")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 4 << 20)
        return Reply(
            status: Int(response.status.code),
            headers: response.headers,
            body: Data(body.readableBytesView),
            version: response.version
        )
    }

    /// Asks for a reminder of `impulse` (as alice) `seconds` from now.
    func remind(_ impulse: String, in seconds: Double) async throws -> Reply {
        let at = ISO8601DateFormatter().string(from: Date().addingTimeInterval(seconds))
        return try await send(
            .POST,
            "/v1/impulses/\(impulse)",
            headers: [("Content-Type", "application/json")],
            body: #"{"remindAt": "\#(at)"}"#
        )
    }
}

extension TestBroker {
    /// One authenticated `GET /CurrentImpulse` against a broker running in another process.
    static func probe(port: Int, directory: String, _ check: (Reply) throws -> Void) async throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(directory + "/tls/self-signed.crt")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)/CurrentImpulse")
            request.headers.add(name: "Authorization", value: "Basic " + Data("anna:demo".utf8).base64EncodedString())
            let response = try await client.execute(request, timeout: .seconds(20))
            let body = try await response.body.collect(upTo: 1 << 20)
            try check(
                Reply(
                    status: Int(response.status.code),
                    headers: response.headers,
                    body: Data(body.readableBytesView),
                    version: response.version
                )
            )
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}
