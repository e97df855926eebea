import Engine
import Foundation
import TestSupport
import Testing

extension HeavyTests {
    /// The PostgreSQL backup the README and the Kubernetes kit's CronJob describe: `pg_dump --format=custom` while a
    /// real `broker serve` dispatches, `pg_restore` into an empty database, a node started on it.
    @Suite("PostgreSQL backups and restores", .timeLimit(.minutes(10)))
    struct PostgresBackupTests {
        /// PostgreSQL's client programs (the newest installed), as `scripts/postgres-cluster` finds them.
        static func tool(_ name: String) throws -> String {
            let versions = try FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")
            let newest = try #require(versions.compactMap(Int.init).max(), "PostgreSQL is not installed")
            return "/usr/lib/postgresql/\(newest)/bin/\(name)"
        }

        /// Runs a program to completion: its exit status and standard error.
        static func run(_ program: String, _ arguments: [String]) async throws -> (status: Int32, error: String) {
            try await offThePool {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: program)
                process.arguments = arguments
                let error = Pipe()
                process.standardError = error
                process.standardOutput = FileHandle.nullDevice
                try process.run()
                let text = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return (process.terminationStatus, text)
            }
        }

        @Test("pg_dump mid-dispatch, pg_restore into an empty database: a node finishes the day from it, once per user")
        func drill() async throws {
            try await self.drillAlone()
        }

        private func drillAlone() async throws {
            let users = 3_000
            let data = TestBroker.temporaryDirectory()
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }
            // Answers after 200 ms: the burst lasts seconds, so the dump lands inside it.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 200}"#).status == 204)
            let live = try await PostgresTestDatabases.make()
            let restoredURL = try await PostgresTestDatabases.make()
            for (folder, url) in [("broker", live), ("restored", restoredURL)] {
                let config = """
                    {"dataDirectory": "\(data)/\(folder)", "database": "\(url)?sslmode=disable",
                     "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "warning",
                     "spreadSeconds": 0, "pushesInFlight": 250, "apns": \(simulator.apnsConfiguration)}
                    """
                try config.write(toFile: data + "/\(folder).json", atomically: true, encoding: .utf8)
            }
            let seeding = try await PostgresStore(
                configuration: try PostgresStoreConfiguration(url: live + "?sslmode=disable"),
                logger: TestBroker.logger
            )
            _ = try await CrashRecoveryTests.seed(seeding, users: users)
            await seeding.close()
            let source = try ScaleOutTests.Probe(url: live)
            defer { source.runner.cancel() }
            let pushedQuery = "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL"

            let serving = try RunningBroker(["serve", "--config", data + "/broker.json"])
            defer { serving.terminate() }
            let started = try await eventually(seconds: 120) {
                try await source.integers(pushedQuery).first ?? 0 >= 300
            }
            #expect(started, "\(serving.output.suffix(2000))")
            let dump = try await Self.run(
                try Self.tool("pg_dump"),
                ["--format=custom", "--file=\(data)/backup.dump", live + "?sslmode=disable"]
            )
            #expect(dump.status == 0, "\(dump.error)")
            #expect(await serving.stop() == 0, "\(serving.output.suffix(2000))")

            let restore = try await Self.run(
                try Self.tool("pg_restore"),
                ["--no-owner", "--exit-on-error", "--dbname=\(restoredURL)?sslmode=disable", "\(data)/backup.dump"]
            )
            #expect(restore.status == 0, "\(restore.error)")
            let restored = try ScaleOutTests.Probe(url: restoredURL)
            defer { restored.runner.cancel() }
            let pushedAtBackup = try await restored.integers(pushedQuery).first ?? -1
            #expect(pushedAtBackup >= 300 && pushedAtBackup < users, "the dump came after the burst; it proves nothing")

            // A node of its own (a new data folder, as on a new machine) on the restored database: no migration needed.
            let second = try RunningBroker(["serve", "--config", data + "/restored.json"])
            defer { second.terminate() }
            let finished = try await eventually(seconds: 180) {
                try await restored.integers(pushedQuery).first == users
            }
            #expect(finished, "\(second.output.suffix(2000))")
            #expect(await second.stop() == 0, "\(second.output.suffix(2000))")
            let ledger = try await restored.integers(
                """
                SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT local_date) FROM deliveries
                WHERE kind = 'scheduled'
                """
            )
            #expect(ledger == [users, users, 1], "\(ledger)")
        }
    }
}
