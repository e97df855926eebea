import Foundation
import GRDB
import Gateway
import TestSupport
import Testing

extension HeavyTests {
    /// The real `broker serve` process stopped with SIGTERM in the middle of a dispatch burst, pushing to a separate
    /// `broker apns-simulator` process: every push APNs accepted before the exit is marked pushed in the ledger before
    /// the exit, so the next start sends none of them again.
    @Suite("Graceful stop", .timeLimit(.minutes(10)))
    struct GracefulStopTests {
        static let users = 5_000

        @Test("SIGTERM in the middle of a 5,000-user burst: 0 accepted but unmarked, 0 repeats after the restart")
        func sigtermDrains() async throws {
            try await self.sigtermDrainsAlone()
        }

        private func sigtermDrainsAlone() async throws {
            let data = TestBroker.temporaryDirectory()
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }
            // Answers after 100 ms with at most 500 in flight: the burst lasts a second or more, and at any moment
            // hundreds of pushes are on the wire, sent but not yet answered.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 100}"#).status == 204)
            let config = """
                {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "notice", "spreadSeconds": 0, "pushesInFlight": 500,
                 "shutdownGraceSeconds": 20, "apns": \(simulator.apnsConfiguration)}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            _ = try await CrashRecoveryTests().seed(directory: data + "/broker", users: Self.users)
            let database = try DatabaseQueue(path: data + "/broker/broker.sqlite")

            let first = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let started = try await eventually(seconds: 120) {
                try await database.read {
                    try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL") ?? 0
                } >= 500
            }
            #expect(started, "\(first.output)")
            #expect(await first.stop() == 0, "\(first.output.suffix(3000))")

            // What APNs accepted before the exit, against what the ledger holds as pushed.
            let acceptedBeforeRestart = Set(
                try await simulator.acceptedPushes().compactMap { $0["collapseID"] as? String }
            )
            let marked = Set(
                try await database.read { db in
                    try Int64.fetchAll(db, sql: "SELECT id FROM deliveries WHERE pushed_at IS NOT NULL")
                }.map { "impulse-\($0)" }
            )
            #expect(acceptedBeforeRestart.count < Self.users, "the stop came after the burst; it proves nothing")
            let unmarked = acceptedBeforeRestart.subtracting(marked)
            #expect(
                unmarked.isEmpty,
                "\(unmarked.count) pushes accepted by APNs but not marked: \(first.output.suffix(2000))"
            )

            // The restart pushes the rest, and nothing twice.
            let second = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let finished = try await eventually(seconds: 180) {
                try await database.read {
                    try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL") ?? 0
                } == Self.users
            }
            #expect(finished, "\(second.output.suffix(2000))")
            #expect(await second.stop() == 0)
            let pushes = try await simulator.acceptedPushes()
            #expect(pushes.count == Self.users, "\(pushes.count - Self.users) pushes repeated")
        }
    }
}
