import ArgumentParser
import Engine
import Foundation
import Gateway
import Logging

/// The embedded default in one command: SQLite in the data directory, a demo tenant with users and a sample
/// catalog in English and German, and the REST API on loopback. Safe to run again on the same data.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the broker on the embedded default with a seeded demo tenant (restartable)."
    )

    @OptionGroup var common: CommonOptions

    @Option(help: "HTTPS listen address host:port.")
    var listen = "127.0.0.1:8443"

    static let tenant = "demo"
    static let password = "demo"
    static let users: [(name: String, language: String, timeZone: String)] = [
        ("anna", "EN", "Europe/London"), ("ben", "DE", "Europe/Berlin"), ("chen", "EN", "Asia/Shanghai"),
        ("dora", "DE", "Europe/Vienna"), ("eli", "EN", "America/New_York"),
    ]

    func run() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["BROKER_LISTEN"] = listen
        environment["BROKER_DEFAULT_TENANT"] = Self.tenant
        let settings = try BrokerSettings(options: common, environment: environment)
        let logger = bootstrapLogging(settings.logLevel)
        let store = try await settings.openStore(logger: logger)
        try await seed(store, settings: settings)
        let app = try await buildApplication(
            configuration: settings.serverConfiguration(),
            store: store,
            logger: logger,
            gracefulShutdownSignals: [.sigterm, .sigint]
        ) { _, port in
            let banner = """

                Impulse Broker demo is running on https://localhost:\(port) (data in \(settings.dataDirectory)).
                Users: \(Self.users.map(\.name).joined(separator: ", ")), password "\(Self.password)". Try:
                  curl --http2 -k -u anna:demo https://localhost:\(port)/CurrentImpulse
                  curl --http2 -k -u ben:demo https://localhost:\(port)/v1/me
                  curl --http2 -k -u anna:demo -X POST https://localhost:\(port)/RegisterToken \\
                       -d '{"DeviceToken": "\(String(repeating: "ab", count: 32))", "DeviceName": "iPhone"}'
                Stop with Ctrl-C; running it again reuses the data.


                """
            // Written straight to the file descriptor: stdout is block-buffered when redirected.
            FileHandle.standardOutput.write(Data(banner.utf8))
        }
        try await app.run()
    }

    /// Creates whatever of the demo tenant is missing; never duplicates.
    private func seed(_ store: SQLiteStore, settings: BrokerSettings) async throws {
        let tenant = try TenantID(Self.tenant)
        if try await store.tenant(tenant) == nil {
            try await store.createTenant(try Tenant(id: tenant, name: "Demo Company", apnsTopic: "com.example.impulse"))
        }
        guard let url = Bundle.module.url(forResource: "demo-catalog", withExtension: "json"),
            let data = FileManager.default.contents(atPath: url.path)
        else { throw ValidationError("the demo catalog is missing from the build") }
        let impulses = try CatalogImport.parse(data, tenant: tenant)
        _ = try await store.importImpulses(impulses, tenant: tenant)
        try writeMedia(settings.dataDirectory + "/media/demo")
        let ledger = DeliveryLedger(store: store)
        for seedUser in Self.users {
            var user = try await store.user(tenant: tenant, username: seedUser.name)
            if user == nil {
                let hash = try await Authenticator.hash(Self.password, cost: settings.bcryptCost)
                user = try await store.createUser(
                    try NewUser(
                        tenant: tenant,
                        username: seedUser.name,
                        passwordHash: hash,
                        language: seedUser.language,
                        preferences: DeliveryPreferences(timeZone: seedUser.timeZone)
                    )
                )
            }
            guard let user else { continue }
            let existing = try await ledger.page(tenant: tenant, user: user.id, limit: 1)
            guard existing.items.isEmpty else { continue }
            let own = impulses.filter { $0.language == seedUser.language && $0.single }.prefix(2)
            _ = try await ledger.assign(
                own.enumerated().map { index, impulse in
                    NewDelivery(
                        tenant: tenant,
                        user: user.id,
                        impulse: impulse.id,
                        kind: .manual,
                        assignedAt: Date().addingTimeInterval(Double(index - 1) * 86_400)
                    )
                }
            )
        }
    }

    private func writeMedia(_ folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="320" height="200"><rect width="320" height="200" fill="#dbeafe"/>\
            <circle cx="160" cy="100" r="60" fill="#60a5fa"/></svg>
            """
        guard FileManager.default.createFile(atPath: folder + "/breathing.svg", contents: Data(svg.utf8)) else {
            throw ValidationError("cannot write demo media into \(folder)")
        }
    }
}
