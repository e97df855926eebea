import Engine
import Foundation
import Gateway
import Logging

/// Scenario 1 and 2: N users due in the same minute on a fresh SQLite store, dispatched by the real scheduler,
/// ledgered durably and pushed through the real gateway and APNs client to the simulator.
enum Burst {
    static let topic = "com.bench.impulse"

    /// `androidPercent`: the share of users whose one device is an Android phone (FCM) instead of an iPhone.
    static func run(
        users: Int,
        deadPercent: Int,
        androidPercent: Int = 0,
        gateway: PushGatewayConfiguration,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let metrics = MetricsSetup()
        let store = try await SQLiteStore(
            configuration: .init(path: work + "/broker.sqlite"),
            logger: logger,
            metrics: metrics.metrics
        )
        let seedStarted = ContinuousClock.now
        try await seed(store, users: users, androidPercent: androidPercent)
        try await plan(store, users: users, logger: logger)
        let seedSeconds = seedStarted.duration(to: .now).seconds
        try await simulator.prepare(deadPercent: deadPercent)

        let endpoint = APNsEndpoint(
            host: "127.0.0.1",
            port: simulator.port,
            tls: simulator.tls(),
            serverHostname: "localhost"
        )
        var configuration = ServerConfiguration(
            dataDirectory: work,
            listen: ListenAddress(host: "127.0.0.1", port: 0),
            apns: .external(
                endpoints: [.production: endpoint, .sandbox: endpoint],
                defaultIdentity: .token(simulator.identity),
                identities: [:]
            ),
            push: gateway,
            scheduler: SchedulerConfiguration(batchSize: 5000, pollInterval: .milliseconds(100), spreadWindow: .zero)
        )
        var account = simulator.account
        account.tokenURI = URL(string: "https://127.0.0.1:\(simulator.port)/token")!
        configuration.fcm = .external(
            endpoint: endpoint,
            defaultAccount: account,
            accounts: [:],
            tokenURI: account.tokenURI
        )
        Machine.resetPeakRSS()
        // A marker for profilers attaching to this process: what follows is the measured dispatch.
        FileHandle.standardError.write(Data("  \(work.split(separator: "/").last ?? ""): dispatch starts\n".utf8))
        let started = ContinuousClock.now
        let cpuStarted = (broker: Machine.cpuSeconds() ?? 0, simulator: simulator.cpuSeconds())
        let app = try await buildApplication(
            configuration: configuration,
            store: store,
            logger: logger,
            metrics: metrics
        )
        let running = Task { try await app.run() }
        defer { running.cancel() }
        guard let gateway = app.pushGateway else { throw BenchError("no push gateway") }
        var lastReport = ContinuousClock.now
        var finished = (accepted: 0, rejected: 0)
        // Every 20 ms, what waits for the gateway: whether the scheduler keeps it fed (queue empty: the scheduler
        // sets the pace) and how many pushes await their answer.
        var samples = (count: 0, empty: 0, queued: 0, inFlight: 0)
        while true {
            let statistics = await gateway.statistics
            finished = (statistics.accepted, statistics.rejected.values.reduce(0, +))
            if finished.accepted + finished.rejected >= users { break }
            let snapshot = await gateway.snapshot()
            let queued = snapshot.queued.values.reduce(0, +)
            if finished.accepted + finished.rejected > 0 {
                samples.count += 1
                samples.empty += queued == 0 ? 1 : 0
                samples.queued += queued
                samples.inFlight += snapshot.inFlight
            }
            if started.duration(to: .now) > .seconds(3600) { throw BenchError("gave up after an hour: \(finished)") }
            if lastReport.duration(to: .now) > .seconds(5) {
                lastReport = .now
                let done = finished.accepted + finished.rejected
                let name = work.split(separator: "/").last ?? ""
                FileHandle.standardError.write(Data("  \(name): \(done)/\(users), queued \(queued)\n".utf8))
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let seconds = started.duration(to: .now).seconds
        let cpu = (
            broker: (Machine.cpuSeconds() ?? 0) - cpuStarted.broker,
            simulator: simulator.cpuSeconds() - cpuStarted.simulator
        )
        let peak = Machine.peakRSS()
        // The marks are group-committed behind the pushes: wait until every delivery is settled in the store.
        while try await !store.unsettledDeliveries(assignedAfter: .distantPast, after: nil, limit: 1).isEmpty {
            try await Task.sleep(for: .milliseconds(50))
        }
        let durableSeconds = started.duration(to: .now).seconds
        let statistics = await gateway.statistics
        let sim = try await simulator.counts()
        await app.shutdown()
        _ = await running.result
        // Removed tokens are only marked gone during the burst; the broker deletes them in bulk minutes later. That
        // deferred cost, timed on its own here.
        let purgeStarted = ContinuousClock.now
        let purged = try await store.purgeRemovedDevices(before: .distantFuture)
        let purgeSeconds = purgeStarted.duration(to: .now).seconds
        return [
            "users": users,
            "deadTokenPercent": deadPercent,
            "androidPercent": androidPercent,
            "seedSeconds": seedSeconds,
            "secondsToLastAnswer": seconds,
            "secondsToLedgerDurable": durableSeconds,
            "acceptedPushes": finished.accepted,
            "rejectedPushes": finished.rejected,
            "acceptedPerSecond": Double(finished.accepted) / seconds,
            "deliveriesPerSecond": Double(users) / seconds,
            "peakRSSBytes": peak,
            // Until the last answer: the broker (this process) and the simulator, per user.
            "brokerCPUMicrosecondsPerUser": cpu.broker / Double(users) * 1e6,
            "simulatorCPUMicrosecondsPerUser": cpu.simulator / Double(users) * 1e6,
            "tokensRemoved": statistics.tokensRemoved,
            "tokensQuarantined": statistics.tokensQuarantined,
            "goneDevicesPurged": purged,
            "purgeSeconds": purgeSeconds,
            "retried": statistics.retried,
            "simulatorAccepted": sim.accepted,
            "simulatorRejected": sim.rejected,
            // From the first answer to the last, sampled every 20 ms.
            "gatewayQueueEmptyShare": Double(samples.empty) / Double(max(1, samples.count)),
            "gatewayMeanQueued": Double(samples.queued) / Double(max(1, samples.count)),
            "gatewayMeanInFlight": Double(samples.inFlight) / Double(max(1, samples.count)),
        ]
    }

    /// Plans every row of the due index, as happens the day before in steady state (a new user's row is planned
    /// when the user is created): the timed burst then starts from rows that are due, not rows to plan.
    static func plan(_ store: any BrokerStore, users: Int, logger: Logger) async throws {
        let planner = Scheduler(
            store: store,
            ledger: DeliveryLedger(store: store, catalog: CatalogCache(store: store)),
            gateway: nil,
            configuration: SchedulerConfiguration(batchSize: 5000, spreadWindow: .zero),
            logger: logger
        )
        while planner.statistics.planned < users {
            let before = planner.statistics.planned
            try await planner.tick(now: Date())
            guard planner.statistics.planned > before else { throw BenchError("planning stalled at \(before)") }
        }
    }

    /// A tenant whose users are all due this minute (UTC), one device each (an Android phone for `androidPercent` of
    /// them, by user id, else an iPhone), in batches of one transaction.
    static func seed(_ store: any BrokerStore, users: Int, androidPercent: Int = 0) async throws {
        let tenant = try TenantID("bench")
        try await store.createTenant(try Tenant(id: tenant, name: "Bench", defaultTimeZone: "UTC", apnsTopic: topic))
        let areas = LifeArea.allCases
        _ = try await store.importImpulses(
            try (1...24).map { n in
                try Impulse(
                    tenant: tenant,
                    id: ImpulseID("impulse-\(n)"),
                    language: "EN",
                    title: "Impulse \(n)",
                    descriptionShort: "A short exercise.",
                    description: "Take five minutes for this exercise.",
                    durationMinutes: 5,
                    action: .do,
                    single: true,
                    imageURLs: [],
                    videoURL: nil,
                    webURL: nil,
                    lifeArea: areas[n % areas.count]
                )
            },
            tenant: tenant
        )
        let now = Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: Date())
        let minute = try LocalTime(hour: now.hour ?? 0, minute: now.minute ?? 0)
        let batch = 20_000
        var next = 1
        while next <= users {
            let range = next...min(users, next + batch - 1)
            let created = try await store.createUsers(
                try range.map {
                    try NewUser(
                        tenant: tenant,
                        username: "user\($0)",
                        passwordHash: "unused",
                        preferences: DeliveryPreferences(timeZone: "UTC", deliveryTime: minute)
                    )
                }
            )
            _ = try await store.registerDevices(
                try created.map { user in
                    let hash = UInt64(user.id.rawValue) &* 0x9E37_79B9_7F4A_7C15
                    let android = Int(user.id.rawValue % 100) < androidPercent
                    return try Device(
                        tenant: tenant,
                        topic: topic,
                        token: android
                            ? DeviceToken(
                                "bench-\(user.id.rawValue):APA91b\(String(format: "%016llx", hash))",
                                channel: .fcm
                            )
                            : DeviceToken(String(format: "%064llx", hash)),
                        owner: user.id,
                        name: "phone",
                        environment: .production,
                        registeredAt: Date(),
                        channel: android ? .fcm : .apns
                    )
                }
            )
            next = range.upperBound + 1
        }
    }
}
