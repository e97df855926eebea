import Engine
import Foundation
import Logging
import PostgresNIO

/// Scenario 8: the daily burst on PostgreSQL, dispatched by N `broker serve` processes sharing one database (each
/// claims batches of due rows and pushes what it recorded), pushing to the same simulator as the SQLite burst.
/// Each run gets a database of its own on the server `--database` names, dropped afterwards.
enum SharedBurst {
    static func run(
        server: String,
        users: Int,
        nodes: Int,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench.shared")
        logger.logLevel = .error
        let admin = try Server(url: server)
        let name = "broker_bench_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await admin.execute("CREATE DATABASE \(name)")
        do {
            let result = try await burst(
                url: admin.url(database: name),
                users: users,
                nodes: nodes,
                simulator: simulator,
                work: work,
                logger: logger
            )
            try await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            return result
        } catch {
            try? await admin.execute("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            throw error
        }
    }

    private static func burst(
        url: String,
        users: Int,
        nodes: Int,
        simulator: SimulatorProcess,
        work: String,
        logger: Logger
    ) async throws -> [String: Any] {
        let seedStarted = ContinuousClock.now
        do {
            let store = try await PostgresStore(
                configuration: try PostgresStoreConfiguration(url: url),
                logger: logger
            )
            try await Burst.seed(store, users: users)
            try await Burst.plan(store, users: users, logger: logger)
            await store.close()
        }
        let probe = try await Server(url: url).connect()
        // Seeding and planning wrote every user's rows two or three times over; a database that has run for a day
        // has had autovacuum clean up such dead row versions and count its tables before the morning's burst.
        _ = try await Server.integers(probe, "VACUUM ANALYZE")
        let seedSeconds = seedStarted.duration(to: .now).seconds
        try await simulator.prepare(deadPercent: 0)
        defer { Task { try? await probe.close() } }
        var processes: [Process] = []
        defer {
            for process in processes where process.isRunning { process.terminate() }
        }
        // A marker for profilers: what follows is the measured dispatch.
        FileHandle.standardError.write(Data("  postgres, \(nodes) node(s): dispatch starts\n".utf8))
        let started = ContinuousClock.now
        let databaseCPUStarted = Machine.cpuSeconds(command: "postgres")
        for node in 1...nodes {
            try writeConfiguration(node: node, url: url, simulator: simulator, work: work, logLevel: "error")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: SimulatorProcess.brokerBinary)
            process.arguments = ["serve", "--config", "\(work)/node\(node).json"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            processes.append(process)
        }
        // Pushes accepted, as the simulator counts them (asking the database instead cost its CPU a quarter of the
        // burst's); the ledger is checked for its marks once at the end.
        var accepted = 0
        var lastReport = ContinuousClock.now
        var peaks = [Int](repeating: 0, count: nodes)
        while accepted < users {
            if started.duration(to: .now) > .seconds(3600) { throw BenchError("gave up after an hour: \(accepted)") }
            guard processes.allSatisfy(\.isRunning) else { throw BenchError("a broker node exited during the burst") }
            try await Task.sleep(for: .milliseconds(50))
            accepted = try await simulator.counts().accepted
            for (index, process) in processes.enumerated() {
                peaks[index] = max(peaks[index], Machine.peakRSS(pid: process.processIdentifier))
            }
            if lastReport.duration(to: .now) > .seconds(5) {
                lastReport = .now
                FileHandle.standardError.write(Data("  postgres, \(nodes) node(s): \(accepted)/\(users)\n".utf8))
            }
        }
        let seconds = started.duration(to: .now).seconds
        let cpu = processes.map { Machine.cpuSeconds(pid: $0.processIdentifier) ?? 0 }
        let databaseCPU = Machine.cpuSeconds(since: databaseCPUStarted, until: Machine.cpuSeconds(command: "postgres"))
        while try await Server.integers(
            probe,
            "SELECT COUNT(*) FROM (SELECT 1 FROM unsettled_deliveries LIMIT 1) AS open"
        )[0] > 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        let durableSeconds = started.duration(to: .now).seconds
        for process in processes {
            process.terminate()
            process.waitUntilExit()
        }
        // Deliveries per node, by the node that recorded them: how the claims shared the work.
        let byNode = try await Server.integers(
            probe,
            "SELECT COUNT(*) FROM deliveries GROUP BY recorded_by ORDER BY 1 DESC"
        )
        return [
            "users": users,
            "nodes": nodes,
            "seedSeconds": seedSeconds,
            "secondsToLastPush": seconds,
            "secondsToLedgerDurable": durableSeconds,
            "deliveriesPerSecond": Double(users) / seconds,
            "simulatorAccepted": try await simulator.counts().accepted,
            "peakRSSBytesPerNode": peaks,
            "brokerCPUMicrosecondsPerUser": cpu.reduce(0, +) / Double(users) * 1e6,
            // Every process named postgres on the machine (the server and its backends), over the same window.
            "databaseCPUMicrosecondsPerUser": databaseCPU / Double(users) * 1e6,
            "deliveriesPerNode": byNode,
        ]
    }

    /// `<work>/node<N>.json` for a node with its own data folder on `url`: the same settings as the in-process
    /// SQLite burst (batches of 5,000 due rows, no spread), pushing to the simulator.
    static func writeConfiguration(
        node: Int,
        url: String,
        simulator: SimulatorProcess,
        work: String,
        logLevel: String
    ) throws {
        let config = """
            {"dataDirectory": "\(work)/node\(node)", "database": "\(url)", "listen": "127.0.0.1:0",
             "adminListen": "off", "logLevel": "\(logLevel)", "spreadSeconds": 0, "dispatchBatchSize": 5000,
             "apns": {"mode": "external", "production": "127.0.0.1:\(simulator.port)", "serverHostname": "localhost",
                      "trustRoots": "\(simulator.certificatePath)",
                      "credential": {"teamID": "\(simulator.identity.teamID)", "keyID": "\(simulator.identity.keyID)",
                                     "keyFile": "\(simulator.keyPath)"}}}
            """
        try config.write(toFile: "\(work)/node\(node).json", atomically: true, encoding: .utf8)
    }

    /// A connection to the server for the benchmark's own statements.
    struct Server {
        let configuration: PostgresStoreConfiguration
        let components: URLComponents

        init(url: String) throws {
            configuration = try PostgresStoreConfiguration(url: url)
            guard let components = URLComponents(string: url) else { throw BenchError("bad database URL \(url)") }
            self.components = components
        }

        /// The same server and user, another database.
        func url(database: String) -> String {
            var copy = components
            copy.path = "/" + database
            return copy.string ?? ""
        }

        func connect() async throws -> PostgresConnection {
            try await PostgresConnection.connect(
                configuration: PostgresConnection.Configuration(
                    host: configuration.host,
                    port: configuration.port,
                    username: configuration.username,
                    password: configuration.password
                        ?? ProcessInfo.processInfo.environment["BROKER_DATABASE_PASSWORD"],
                    database: configuration.database,
                    tls: .disable
                ),
                id: 1,
                logger: Logger(label: "bench.postgres")
            )
        }

        func execute(_ sql: String) async throws {
            let connection = try await connect()
            defer { Task { try? await connection.close() } }
            try await connection.query(PostgresQuery(unsafeSQL: sql), logger: connection.logger)
        }

        static func integers(_ connection: PostgresConnection, _ sql: String) async throws -> [Int] {
            var values: [Int] = []
            for try await value in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: connection.logger)
                .decode(Int.self)
            {
                values.append(value)
            }
            return values
        }
    }
}
