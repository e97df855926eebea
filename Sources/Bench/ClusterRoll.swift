import Engine
import Foundation
import Logging
import PostgresNIO

/// Scenario 10 (issue 33): three `broker serve` nodes, each with its own data folder (as on separate machines),
/// on one PostgreSQL database, all users due at once. Three runs on fresh databases: undisturbed (the baseline),
/// one node SIGKILLed at 30% and started again, and a rolling SIGTERM restart of all three nodes from 20%. Each
/// reports every user's delivery count, the simulator's acceptances (beyond one per user: repeats) and refusals,
/// the provider tokens stored, and the lag from the nodes' start to APNs' acceptance (p50, p99, max).
enum ClusterRoll {
    enum Event: String, CaseIterable {
        case none
        case kill
        case rolling
    }

    static func run(server: String, users: Int, simulator: SimulatorProcess, work: String) async throws -> [String: Any]
    {
        var results: [String: Any] = [:]
        for event in Event.allCases {
            let admin = try SharedBurst.Server(url: server)
            let name = "broker_cluster_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
            try await admin.execute("CREATE DATABASE \(name)")
            do {
                results[event.rawValue] = try await burst(
                    url: admin.url(database: name),
                    users: users,
                    event: event,
                    simulator: simulator,
                    work: work + "/" + event.rawValue
                )
                try await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            } catch {
                try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                throw error
            }
        }
        return results
    }

    /// A node's process, its log appended to `<work>/node<N>.log`.
    static func start(node: Int, work: String) throws -> Process {
        let log = "\(work)/node\(node).log"
        if !FileManager.default.fileExists(atPath: log) {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: SimulatorProcess.brokerBinary)
        process.arguments = ["serve", "--config", "\(work)/node\(node).json"]
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    private static func burst(
        url: String,
        users: Int,
        event: Event,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench.cluster")
        logger.logLevel = .error
        let seedStarted = ContinuousClock.now
        do {
            let store = try await PostgresStore(configuration: try PostgresStoreConfiguration(url: url), logger: logger)
            try await Burst.seed(store, users: users)
            try await Burst.plan(store, users: users, logger: logger)
            await store.close()
        }
        let probe = try await SharedBurst.Server(url: url).connect()
        defer { Task { try? await probe.close() } }
        _ = try await SharedBurst.Server.integers(probe, "VACUUM ANALYZE")
        let seedSeconds = seedStarted.duration(to: .now).seconds
        try await simulator.prepare(deadPercent: 0)
        for node in 1...3 {
            // The shared burst's settings, the heartbeat's defaults (3 s, silence 10 s), the default grace period.
            try SharedBurst.writeConfiguration(
                node: node,
                url: url,
                simulator: simulator,
                work: work,
                logLevel: "notice"
            )
        }
        FileHandle.standardError.write(Data("  cluster (\(event.rawValue)): dispatch starts\n".utf8))
        let startedAt = Date()
        let started = ContinuousClock.now
        var nodes = try (1...3).map { try Self.start(node: $0, work: work) }
        defer { for node in nodes where node.isRunning { node.terminate() } }
        var accepted = 0
        var happened = false
        var stopStatuses: [Int32] = []
        var lastReport = ContinuousClock.now
        func unsettled() async throws -> Int {
            try await SharedBurst.Server.integers(probe, "SELECT COUNT(*) FROM unsettled_deliveries")[0]
        }
        while true {
            if started.duration(to: .now) > .seconds(3600) { throw BenchError("gave up after an hour: \(accepted)") }
            try await Task.sleep(for: .milliseconds(100))
            accepted = try await simulator.counts().accepted
            if accepted >= users, try await unsettled() == 0 { break }
            if !happened, event == .kill, accepted >= users * 3 / 10 {
                happened = true
                kill(nodes[1].processIdentifier, SIGKILL)
                nodes[1].waitUntilExit()
                nodes[1] = try Self.start(node: 2, work: work)
            }
            if !happened, event == .rolling, accepted >= users / 5 {
                happened = true
                for index in nodes.indices {
                    nodes[index].terminate()
                    nodes[index].waitUntilExit()
                    stopStatuses.append(nodes[index].terminationStatus)
                    nodes[index] = try Self.start(node: index + 1, work: work)
                    // Up and taking work before the next one stops.
                    try await Task.sleep(for: .seconds(2))
                }
            }
            guard nodes.allSatisfy({ $0.isRunning }) else { throw BenchError("a broker node exited during the burst") }
            if lastReport.duration(to: .now) > .seconds(5) {
                lastReport = .now
                FileHandle.standardError.write(Data("  cluster (\(event.rawValue)): \(accepted)/\(users)\n".utf8))
            }
        }
        let seconds = started.duration(to: .now).seconds
        for node in nodes {
            node.terminate()
            node.waitUntilExit()
            stopStatuses.append(node.terminationStatus)
        }
        let origin = Int(startedAt.timeIntervalSince1970 * 1000)
        let lags = try await SharedBurst.Server.integers(
            probe,
            """
            SELECT (x * 1000)::bigint - \(origin) FROM unnest((
                SELECT percentile_disc(ARRAY[0.5, 0.99, 1.0]) WITHIN GROUP (ORDER BY pushed_at) FROM deliveries
            )) AS x
            """
        )
        var ledger: [Int] = []
        for query in [
            "SELECT COUNT(*) FROM deliveries", "SELECT COUNT(DISTINCT user_id) FROM deliveries",
            "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL", "SELECT COUNT(*) FROM provider_tokens",
        ] {
            ledger.append(try await SharedBurst.Server.integers(probe, query)[0])
        }
        let counts = try await simulator.counts()
        return [
            "users": users,
            "seedSeconds": seedSeconds,
            "secondsToLastPush": seconds,
            "deliveries": ledger[0],
            "usersWithDelivery": ledger[1],
            "pushed": ledger[2],
            "providerTokens": ledger[3],
            "simulatorAccepted": counts.accepted,
            "simulatorRejected": counts.rejected,
            "repeats": counts.accepted - users,
            "lagSeconds": [
                "p50": Double(lags[0]) / 1000, "p99": Double(lags[1]) / 1000, "max": Double(lags[2]) / 1000,
            ],
            "stopExitStatuses": stopStatuses.map(Int.init),
        ]
    }
}
