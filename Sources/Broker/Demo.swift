import ArgumentParser
import Engine
import Foundation
import Gateway
import Logging

/// The embedded default in one command: SQLite in the data directory, the push simulator in-process (APNs and
/// FCM), a demo tenant with a sample catalog in English and German and a few hundred users spread over time zones,
/// on iPhones and Android phones, whose delivery times fall in the next minutes. Shows the dispatch as it happens. Safe to run again on the same data:
/// users already seeded keep their times, and a day already delivered is not delivered again.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the broker on the embedded default with a seeded demo tenant and watch the dispatch."
    )

    @OptionGroup var common: CommonOptions

    @Option(help: "HTTPS listen address host:port.")
    var listen = "127.0.0.1:8443"

    @Option(help: "Demo users to seed on first start (besides anna, ben, chen, dora and eli).")
    var users = 300

    @Option(help: "Spread the first deliveries over this many minutes from now.")
    var minutes = 3

    static let tenant = "demo"
    static let password = "demo"
    static let named: [(name: String, language: String, timeZone: String)] = [
        ("anna", "EN", "Europe/London"), ("ben", "DE", "Europe/Berlin"), ("chen", "EN", "Asia/Shanghai"),
        ("dora", "DE", "Europe/Vienna"), ("eli", "EN", "America/New_York"),
    ]
    static let zones = [
        "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Tokyo",
        "Asia/Kolkata", "Australia/Sydney", "Pacific/Auckland", "Pacific/Kiritimati", "Pacific/Pago_Pago",
        "America/Sao_Paulo", "Africa/Nairobi", "Asia/Kathmandu", "America/St_Johns",
    ]

    func validate() throws {
        guard (0...100_000).contains(users) else { throw ValidationError("--users must be 0-100000") }
        guard (1...60).contains(minutes) else { throw ValidationError("--minutes must be 1-60") }
    }

    func run() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["BROKER_LISTEN"] = listen
        environment["BROKER_DEFAULT_TENANT"] = Self.tenant
        // A short spreading window, so the demo's deliveries land within the minutes it announces.
        if environment["BROKER_SPREAD_SECONDS"] == nil { environment["BROKER_SPREAD_SECONDS"] = "30" }
        let settings = try {
            var settings = try BrokerSettings(options: common, environment: environment)
            // A trial on its own data folder: it brings the schema up to date itself.
            settings.migrations = .apply
            return settings
        }()
        let logger = bootstrapLogging(settings.logLevel)
        let metrics = MetricsSetup()
        let store = try await settings.openStore(logger: logger, metrics: metrics.metrics)
        let seeded = try await seed(store, settings: settings)
        var configuration = settings.serverConfiguration(logger: logger)
        // The demo's own simulator shows what it received, behind a token printed once; `serve`'s exposes nothing.
        let controlToken = Self.randomToken()
        if settings.apnsIsEmbedded { configuration.apns = .embeddedSimulator(controlToken: controlToken) }
        let app = try await buildApplication(
            configuration: configuration,
            store: store,
            logger: logger,
            metrics: metrics,
            gracefulShutdownSignals: [.sigterm, .sigint]
        ) { listener, port in
            switch listener {
            case .https: Self.write(banner(port: port, settings: settings, seeded: seeded))
            case .admin:
                Self.write(
                    "Metrics: curl http://127.0.0.1:\(port)/metrics · live state: curl http://127.0.0.1:\(port)/inspect\n"
                )
            case .plain: break
            }
        }
        let progress = Task { await Self.showProgress(app, users: seeded.total, controlToken: controlToken) }
        defer { progress.cancel() }
        try await app.run()
    }

    private func banner(port: Int, settings: BrokerSettings, seeded: Seeded) -> String {
        let simulator = settings.apnsIsEmbedded ? "" : " (pushes go to the configured APNs)"
        return """

            Impulse Broker demo is running on https://localhost:\(port) (data in \(settings.dataDirectory)).
            \(seeded.created) users created now, \(seeded.total) in tenant "demo"; delivery times in the next \
            \(minutes) minutes\(simulator).
            Users: \(Self.named.map(\.name).joined(separator: ", ")), user001... all with password "\(Self.password)". Try:
              curl --http2 -k -u anna:demo https://localhost:\(port)/CurrentImpulse
              curl --http2 -k -u ben:demo https://localhost:\(port)/v1/impulses
              curl --http2 -k -u anna:demo -X POST https://localhost:\(port)/v1/impulses/<workingID> \\
                   -H 'Content-Type: application/json' -d '{"time": "18:30"}'     # a reminder
            Console: https://localhost:\(port)/t/demo/console, for an admin of the tenant \
            (broker user add demo NAME --admin --password-stdin).
            Stop with Ctrl-C; running it again reuses the data and delivers nothing twice.


            """
    }

    /// One line every two seconds while something changes: what came due, what was recorded and pushed.
    static func showProgress(_ app: BrokerApplication, users: Int, controlToken: String) async {
        let interactive = isatty(STDOUT_FILENO) == 1
        var last = ""
        var announced = false
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(2)) } catch { return }
            if !announced, let port = app.simulator?.listeningPort {
                announced = true
                write(
                    "What APNs received: curl --http2 -k -H 'Authorization: Bearer \(controlToken)' "
                        + "https://localhost:\(port)/_simulator/accepted\n"
                        + "What FCM received: curl --http2 -k -H 'Authorization: Bearer \(controlToken)' "
                        + "https://localhost:\(port)/_simulator/fcm/accepted\n"
                )
            }
            let scheduler = app.scheduler?.statistics ?? SchedulerStatistics()
            let push = await app.pushGateway?.statistics ?? PushStatistics()
            let failed = push.rejected.values.reduce(0, +) + push.transportFailures
            let line =
                "dispatch: \(users) users · due \(scheduler.due) · assigned \(scheduler.assigned) · pushed "
                + "\(push.accepted) · failed \(failed) · no device \(push.withoutDevice) · resent \(scheduler.requeued)"
            guard line != last else { continue }
            last = line
            write(interactive ? "\r" + line + "   " : line + "\n")
        }
    }

    /// 128 random bits as hex, for a control token.
    static func randomToken() -> String {
        (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// Straight to the file descriptor: stdout is block-buffered when redirected.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    struct Seeded {
        var created: Int
        var total: Int
    }

    /// Creates whatever of the demo tenant is missing; never duplicates, never moves an existing user's time.
    private func seed(_ store: any BrokerStore, settings: BrokerSettings) async throws -> Seeded {
        let tenantID = try TenantID(Self.tenant)
        if try await store.tenant(tenantID) == nil {
            try await store.createTenant(
                try Tenant(id: tenantID, name: "Demo Company", apnsTopic: "com.example.impulse")
            )
        }
        guard let tenant = try await store.tenant(tenantID) else { throw ValidationError("cannot create the tenant") }
        guard let url = Bundle.module.url(forResource: "demo-catalog", withExtension: "json"),
            let data = FileManager.default.contents(atPath: url.path)
        else { throw ValidationError("the demo catalog is missing from the build") }
        _ = try await store.importImpulses(try CatalogImport.parse(data, tenant: tenantID), tenant: tenantID)
        try writeMedia(settings.dataDirectory + "/media/demo")
        // One bcrypt hash for every demo user: hundreds of hashes at the production cost would take minutes.
        let hash = try await Authenticator.hash(Self.password, cost: settings.bcryptCost)
        let now = Date()
        var people = Self.named.map { (name: $0.name, language: $0.language, zone: $0.timeZone) }
        for index in 0..<users {
            people.append(
                (
                    String(format: "user%03d", index + 1), index % 3 == 0 ? "DE" : "EN",
                    Self.zones[index % Self.zones.count]
                )
            )
        }
        let existing = Set(try await store.users(tenant: tenantID).map(\.username))
        var newUsers: [NewUser] = []
        for (index, person) in people.enumerated() where !existing.contains(person.name) {
            // This minute for the first of each group (delivered at once), the next minutes for the others.
            let zone = TimeZone(identifier: person.zone) ?? .gmt
            let local = Calendar(identifier: .gregorian).dateComponents(in: zone, from: now)
            let minute = ((local.hour ?? 0) * 60 + (local.minute ?? 0) + index % minutes) % 1440
            let scores = try LifeAreaScores(
                LifeArea.allCases.indices.map { area in 20 + Int(stableHash(person.name, String(area)) % 70) }
            )
            newUsers.append(
                try NewUser(
                    tenant: tenantID,
                    username: person.name,
                    passwordHash: hash,
                    language: person.language,
                    lifeAreas: scores,
                    preferences: DeliveryPreferences(
                        timeZone: person.zone,
                        deliveryTime: try LocalTime(minuteOfDay: minute)
                    )
                )
            )
        }
        let created = try await store.createUsers(newUsers)
        // Every demo user without a device gets one: the new ones, and any whose device a run killed between the
        // two transactions never registered (rerunning resumes the seed instead of leaving them without).
        let names = Set(people.map(\.name))
        let demoUsers = try await store.users(tenant: tenantID).filter { names.contains($0.username) }
        let targets = try await store.pushTargets(tenant: tenantID, users: demoUsers.map(\.id))
        let deviceless = demoUsers.filter { targets[$0.id]?.devices.isEmpty ?? true }
        // With FCM configured, ben, dora and about a third of the others carry an Android phone, the rest an iPhone.
        let android: Bool = if case .disabled = settings.fcm { false } else { true }
        _ = try await store.registerDevices(
            try deviceless.map { user in
                let hash = stableHash("demo-device", user.username)
                let named = Self.named.contains { $0.name == user.username }
                let onAndroid = android && (named ? ["ben", "dora"].contains(user.username) : hash % 3 == 0)
                return try Device(
                    tenant: tenantID,
                    topic: tenant.apnsTopic,
                    token: onAndroid
                        ? try DeviceToken(
                            "demo-\(user.username):APA91b\(String(format: "%016llx", hash))",
                            channel: .fcm
                        )
                        : try DeviceToken(String(format: "%064llx", hash)),
                    owner: user.id,
                    name: "\(user.username)'s \(onAndroid ? "Android phone" : "iPhone")",
                    environment: .production,
                    registeredAt: now,
                    channel: onAndroid ? .fcm : .apns
                )
            }
        )
        return Seeded(created: created.count, total: try await store.users(tenant: tenantID).count)
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
