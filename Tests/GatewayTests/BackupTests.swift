import Foundation
import GRDB
import Gateway
import TestSupport
import Testing

extension HeavyTests {
    /// `broker store backup` and `broker store restore` on an embedded deployment: a backup taken while a real
    /// `broker serve` dispatches, restored into a fresh data folder, and served from there.
    @Suite("Backups and restores", .timeLimit(.minutes(10)))
    struct BackupTests {
        @Test(
            "A backup taken mid-dispatch restores into a fresh folder; the broker finishes the day from it, once per user"
        )
        func drill() async throws {
            try await self.drillAlone()
        }

        private func drillAlone() async throws {
            let users = 3_000
            let data = TestBroker.temporaryDirectory()
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }
            // Answers after 200 ms: the burst lasts seconds, so the backup lands inside it.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 200}"#).status == 204)
            for folder in ["broker", "restored"] {
                let config = """
                    {"dataDirectory": "\(data)/\(folder)", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "warning",
                     "spreadSeconds": 0, "pushesInFlight": 250, "apns": \(simulator.apnsConfiguration)}
                    """
                try config.write(toFile: data + "/\(folder).json", atomically: true, encoding: .utf8)
            }
            _ = try await CrashRecoveryTests().seed(directory: data + "/broker", users: users)
            let live = try DatabaseQueue(path: data + "/broker/broker.sqlite")
            func pushed(_ database: DatabaseQueue) async throws -> Int {
                try await database.read {
                    try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL") ?? 0
                }
            }

            let serving = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let started = try await eventually(seconds: 120) { try await pushed(live) >= 300 }
            #expect(started, "\(serving.output)")
            let backup = try await BrokerProcess.run(
                ["store", "backup", "--from", data + "/broker/broker.sqlite", "--to", data + "/backup.sqlite"],
                dataDirectory: nil
            )
            #expect(backup.status == 0, "\(backup.output) \(backup.error)")
            #expect(backup.output.contains("backed up"), "\(backup.output)")
            let pushedAtBackup = try await pushed(try DatabaseQueue(path: data + "/backup.sqlite"))
            #expect(await serving.stop() == 0, "\(serving.output.suffix(2000))")
            #expect(pushedAtBackup < users, "the backup came after the burst; it proves nothing")
            // A second backup to the same name is refused: a backup never overwrites.
            let again = try await BrokerProcess.run(
                ["store", "backup", "--from", data + "/broker/broker.sqlite", "--to", data + "/backup.sqlite"],
                dataDirectory: nil
            )
            #expect(again.status != 0 && again.error.contains("never overwrites"), "\(again.error)")

            // Restored into a fresh folder (as on a new machine) and served from there.
            try FileManager.default.createDirectory(atPath: data + "/restored", withIntermediateDirectories: true)
            let restore = try await BrokerProcess.run(
                ["store", "restore", "--from", data + "/backup.sqlite", "--to", data + "/restored/broker.sqlite"],
                dataDirectory: nil
            )
            #expect(restore.status == 0, "\(restore.output) \(restore.error)")
            let restored = try DatabaseQueue(path: data + "/restored/broker.sqlite")
            let second = try RunningBroker(["serve", "--config", data + "/restored.json"])
            let finished = try await eventually(seconds: 180) { try await pushed(restored) == users }
            #expect(finished, "\(second.output.suffix(2000))")
            #expect(await second.stop() == 0)
            let ledger = try #require(
                try await restored.read { db in
                    try Row.fetchOne(
                        db,
                        sql: """
                            SELECT COUNT(*) AS n, COUNT(DISTINCT user_id) AS users, COUNT(DISTINCT local_date) AS days
                            FROM deliveries WHERE kind = 'scheduled'
                            """
                    )
                }
            )
            #expect(ledger["n"] as Int? == users && ledger["users"] as Int? == users && ledger["days"] as Int? == 1)
        }

        @Test("A restore refuses what is no whole broker database and keeps the file it replaces")
        func refusals() async throws {
            let data = TestBroker.temporaryDirectory()
            _ = try await CrashRecoveryTests().seed(directory: data + "/a", users: 3)
            try "not a database".write(toFile: data + "/garbage.sqlite", atomically: true, encoding: .utf8)
            let garbage = try await BrokerProcess.run(
                ["store", "restore", "--from", data + "/garbage.sqlite", "--to", data + "/a/broker.sqlite"],
                dataDirectory: nil
            )
            #expect(garbage.status != 0, "\(garbage.output)")
            // The target is untouched.
            let users = try await DatabaseQueue(path: data + "/a/broker.sqlite").read {
                try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM users")
            }
            #expect(users == 3)
            // A database that is no broker's is refused too; a real backup restored over the file keeps the one it replaces.
            let other = try DatabaseQueue(path: data + "/other.sqlite")
            try await other.write { try $0.execute(sql: "CREATE TABLE deliveries (id INTEGER)") }
            try other.close()
            let foreign = try await BrokerProcess.run(
                ["store", "restore", "--from", data + "/other.sqlite", "--to", data + "/a/broker.sqlite"],
                dataDirectory: nil
            )
            #expect(foreign.status != 0 && foreign.error.contains("not a broker database"), "\(foreign.error)")
            #expect(
                try await BrokerProcess.run(
                    ["store", "backup", "--from", data + "/a/broker.sqlite", "--to", data + "/b.sqlite"],
                    dataDirectory: nil
                ).status == 0
            )
            let replaced = try await BrokerProcess.run(
                ["store", "restore", "--from", data + "/b.sqlite", "--to", data + "/a/broker.sqlite"],
                dataDirectory: nil
            )
            #expect(replaced.status == 0, "\(replaced.error)")
            // The replaced file, and the -wal and -shm it had beside it, renamed with it.
            let kept = try FileManager.default.contentsOfDirectory(atPath: data + "/a").filter {
                $0.hasPrefix("broker.sqlite.before-restore-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
            }
            #expect(kept.count == 1, "\(kept)")
        }
    }
}
