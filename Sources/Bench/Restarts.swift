import Engine
import Foundation
import GRDB
import Logging

/// Scenario 6: `broker serve` (a separate process on its own SQLite file) dispatches N users due this minute and
/// is killed with SIGKILL every `killEvery`, then started again, until every delivery is settled. Each user has
/// one device, so every APNs acceptance beyond N is a repeat: a push APNs had accepted whose pushed mark died
/// with the process. The collapse id makes a repeat replace the first on the phone, but it costs a push and may
/// wake the phone again (issue 20, item 9).
enum Restarts {
    static func run(
        users: Int,
        killEvery: Duration,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench.restarts")
        logger.logLevel = .error
        let database = work + "/broker.sqlite"
        do {
            let store = try await SQLiteStore(configuration: .init(path: database), logger: logger)
            try await Burst.seed(store, users: users)
            try await Burst.plan(store, users: users, logger: logger)
        }
        try await simulator.prepare(deadPercent: 0)
        let config = """
            {"dataDirectory": "\(work)", "listen": "127.0.0.1:0", "adminListen": "off", "logLevel": "error",
             "spreadSeconds": 0,
             "apns": {"mode": "external", "production": "127.0.0.1:\(simulator.port)", "serverHostname": "localhost",
                      "trustRoots": "\(simulator.certificatePath)",
                      "credential": {"teamID": "\(simulator.identity.teamID)", "keyID": "\(simulator.identity.keyID)",
                                     "keyFile": "\(simulator.keyPath)"}}}
            """
        try config.write(toFile: work + "/broker.json", atomically: true, encoding: .utf8)
        let reader = try DatabaseQueue(path: database)
        func open() throws -> Int {
            try reader.read { db in
                let all = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM deliveries") ?? 0
                let settled = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM deliveries WHERE settled_at IS NOT NULL")
                return users - min(all, settled ?? 0)
            }
        }
        let started = ContinuousClock.now
        var runs = 0
        var killed = 0
        while try open() > 0 {
            guard started.duration(to: .now) < .seconds(600) else {
                throw BenchError("restarts: not settled in 10 min")
            }
            runs += 1
            let broker = Process()
            broker.executableURL = URL(fileURLWithPath: SimulatorProcess.brokerBinary)
            broker.arguments = ["serve", "--config", work + "/broker.json"]
            broker.standardOutput = FileHandle.nullDevice
            broker.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try broker.run()
            let deadline = ContinuousClock.now + killEvery
            while broker.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            if broker.isRunning {
                kill(broker.processIdentifier, SIGKILL)
                killed += 1
            }
            broker.waitUntilExit()
            FileHandle.standardError.write(Data("  restarts: run \(runs), \(try open()) deliveries open\n".utf8))
        }
        let accepted = try await simulator.counts().accepted
        return [
            "users": users, "killEverySeconds": killEvery.seconds, "runs": runs, "killed": killed,
            "accepted": accepted, "repeats": accepted - users,
            "repeatsPerThousand": Double(accepted - users) * 1000 / Double(max(1, users)),
        ]
    }
}
