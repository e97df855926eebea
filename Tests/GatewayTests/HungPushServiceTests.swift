import Foundation
import GRDB
import Gateway
import PostgresNIO
import TestSupport
import Testing

@testable import Engine

extension HeavyTests {
    /// SIGTERM while the push service hangs: its connections stay open and nothing answers (a stopped simulator
    /// process, SIGSTOP). The stop must still end within the grace period and a few seconds, exit 0 and say what it
    /// left unsettled; after a restart with the service answering again, every user gets the day once.
    @Suite("A graceful stop while a push service hangs", .timeLimit(.minutes(5)))
    struct HungPushServiceTests {
        static let users = 300
        static let grace = 4

        @Test(
            "SIGTERM with the push service stopped (SIGSTOP): exit 0 within the grace period, nothing lost",
            arguments: [PushChannel.apns, .fcm],
            [StoreKind.sqlite, .postgres]
        )
        func stopWhileHung(channel: PushChannel, database: StoreKind) async throws {
            let data = TestBroker.temporaryDirectory()
            let account = FCMServiceAccount(
                projectID: "acme-hung",
                clientEmail: "broker@acme-hung.iam.gserviceaccount.com",
                privateKeyID: "hung",
                key: try FCMTests.key()
            )
            try account.json().write(to: URL(fileURLWithPath: data + "/service-account.json"))
            let simulator = try await SimulatorUnderTest.start(data: data, fcmAccount: data + "/service-account.json")
            defer {
                kill(simulator.process.process.processIdentifier, SIGCONT)
                simulator.terminate()
            }
            // Answers after 200 ms with at most 50 in flight: the burst lasts a second or more.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 200}"#).status == 204)
            let store: any BrokerStore
            let location: String
            switch database {
            case .sqlite:
                location = data + "/broker/broker.sqlite"
                try FileManager.default.createDirectory(atPath: data + "/broker", withIntermediateDirectories: true)
                store = try await SQLiteStore(configuration: .init(path: location), logger: TestBroker.logger)
            case .postgres:
                location = try await PostgresTestDatabases.makeMigrated() + "?sslmode=disable"
                store = try await PostgresStore(
                    configuration: try PostgresStoreConfiguration(url: location),
                    logger: TestBroker.logger
                )
            }
            _ = try await CrashRecoveryTests.seed(store, users: Self.users, channel: channel)
            let databaseMember = database == .postgres ? #""database": "\#(location)","# : ""
            let config = """
                {"dataDirectory": "\(data)/broker", \(databaseMember) "listen": "127.0.0.1:0", "adminListen": "off",
                 "logLevel": "notice", "spreadSeconds": 0, "pushesInFlight": 50, "pushBatchSize": 25,
                 "shutdownGraceSeconds": \(Self.grace),
                 "apns": \(simulator.apnsConfiguration),
                 "fcm": \(simulator.fcmConfiguration(account: data + "/service-account.json"))}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            func pushed() async throws -> Int {
                let rows = try await Self.count(store, "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL")
                return rows
            }

            let first = try RunningBroker(["serve", "--config", data + "/broker.json"])
            defer { first.terminate() }
            let started = try await eventually(seconds: 60) { try await pushed() >= 25 }
            #expect(started, "\(first.output.suffix(3000))")
            kill(simulator.process.process.processIdentifier, SIGSTOP)
            // Pushes go out to the stopped service and wait for answers that do not come.
            let stoppedAt = ContinuousClock.now
            kill(first.process.processIdentifier, SIGTERM)
            await first.process.exited()
            let took = stoppedAt.duration(to: .now)
            print("\(channel) on \(database): stopped in \(took) with the push service hung (grace \(Self.grace) s)")
            #expect(
                first.process.terminationReason == .exit && first.process.terminationStatus == 0,
                "exit \(first.process.terminationReason == .exit ? "status" : "signal") \(first.process.terminationStatus) after \(took): \(first.output.suffix(3000))"
            )
            #expect(took < .seconds(Self.grace + 15), "the stop took \(took): \(first.output.suffix(3000))")
            #expect(
                first.output.contains("unsettled"),
                "the stop does not say what it left unsettled: \(first.output.suffix(3000))"
            )
            let pushedAtStop = try await pushed()
            #expect(pushedAtStop < Self.users, "the stop came after the burst; it proves nothing")

            // The service answers again: a restart pushes the rest, each user's day once.
            kill(simulator.process.process.processIdentifier, SIGCONT)
            let second = try RunningBroker(["serve", "--config", data + "/broker.json"])
            defer { second.terminate() }
            let finished = try await eventually(seconds: 120) { try await pushed() == Self.users }
            #expect(finished, "\(second.output.suffix(3000))")
            #expect(await second.stop() == 0, "\(second.output.suffix(3000))")
            let deliveries = try await Self.count(store, "SELECT COUNT(*) FROM deliveries WHERE kind = 'scheduled'")
            #expect(deliveries == Self.users)
            await store.close()
        }

        /// One count, on either store.
        static func count(_ store: any BrokerStore, _ sql: String) async throws -> Int {
            if let sqlite = store as? SQLiteStore {
                return try await sqlite.read { try Int.fetchOne($0, sql: sql) ?? 0 }
            }
            let postgres = try #require(store as? PostgresStore)
            return try await postgres.read { connection in
                var count = 0
                for try await row in try await connection.query(
                    PostgresQuery(unsafeSQL: sql),
                    logger: TestBroker.logger
                ) {
                    count = try row.decode(Int.self)
                }
                return count
            }
        }
    }
}
