import Engine
import Foundation
import GRDB
import TestSupport
import Testing

/// A rolling upgrade's premise: the previous release's nodes keep working on this release's schema while the new
/// nodes start. The previous release's `broker serve` (built by `scripts/previous-release` from the commit in
/// `scripts/previous-release.commit`, which `scripts/test` runs first) is started on a store this release created
/// and migrated, and must dispatch the day: every user pushed once, the schema left as it was.
// The limit covers the wait for the heavy-test gate, behind the cluster and crash tests (one full run spent over
// six minutes there); the test itself takes seconds.
extension HeavyTests {
    @Suite("Upgrades: the previous release on this release's schema", .timeLimit(.minutes(15)))
    struct PreviousReleaseTests {
        static let users = 300

        /// `.build/previous-release/broker`, beside the test bundle's build folder.
        static var previousRelease: URL {
            get throws {
                let url = BrokerProcess.executable.deletingLastPathComponent()
                    .appendingPathComponent("../../previous-release/broker").standardizedFileURL
                guard FileManager.default.isExecutableFile(atPath: url.path) else {
                    throw PreviousReleaseMissing(
                        "no previous release at \(url.path): ./scripts/previous-release builds it (scripts/test runs it)"
                    )
                }
                return url
            }
        }

        struct PreviousReleaseMissing: Error, CustomStringConvertible {
            var description: String
            init(_ description: String) { self.description = description }
        }

        @Test("The previous release's node dispatches a day on this release's schema", arguments: TestDatabase.allCases)
        func previousReleaseDispatches(_ database: TestDatabase) async throws {
            try await self.dispatch(database)
        }

        private func dispatch(_ database: TestDatabase) async throws {
            let previous = try Self.previousRelease
            let data = TestBroker.temporaryDirectory()
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }

            // This release creates the store: its whole schema, then the users, all due this minute.
            let store: any BrokerStore
            var setting = ""
            switch database {
            case .sqlite:
                try FileManager.default.createDirectory(atPath: data + "/node", withIntermediateDirectories: true)
                store = try await SQLiteStore(
                    configuration: .init(path: data + "/node/broker.sqlite"),
                    logger: TestBroker.logger
                )
            case .postgres:
                let url = try await PostgresTestDatabases.make() + "?sslmode=disable"
                store = try await PostgresStore(
                    configuration: try PostgresStoreConfiguration(url: url),
                    logger: TestBroker.logger
                )
                setting = #""database": "\#(url)&pool=4","#
            }
            let tokens = try await CrashRecoveryTests.seed(store, users: Self.users)
            let schema = try await Self.schema(store, data: data)
            #expect(!schema.isEmpty)
            let config = """
                {"dataDirectory": "\(data)/node", \(setting) "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0",
                 "logLevel": "warning", "spreadSeconds": 0, "apns": \(simulator.apnsConfiguration)}
                """
            try config.write(toFile: data + "/node.json", atomically: true, encoding: .utf8)

            let node = try RunningBroker(["serve", "--config", data + "/node.json"], executable: previous)
            defer { node.terminate() }
            let acme = try TenantID("acme")
            let pushed = try await eventually(seconds: 180) {
                guard try await simulator.acceptedPushes().count >= Self.users else { return false }
                return try await store.unsettledDeliveries(assignedAfter: .distantPast, after: nil, limit: 1).isEmpty
            }
            #expect(pushed, "\(node.output.suffix(3000))")
            #expect(await node.stop() == 0, "a graceful stop: \(node.output.suffix(2000))")

            // One delivery and one push per user, to their device; the previous release changed no schema.
            let deliveries = try await store.deliveryCounts(tenant: acme)
            #expect(deliveries.count == Self.users && deliveries.values.allSatisfy { $0 == 1 })
            let pushes = try await simulator.acceptedPushes()
            #expect(Set(pushes.compactMap { $0["collapseID"] as? String }).count == Self.users)
            #expect(Set(pushes.compactMap { $0["token"] as? String }) == Set(tokens.values))
            #expect(try await Self.schema(store, data: data) == schema)
            await (store as? PostgresStore)?.close()
        }

        /// The migrations the store records as applied.
        static func schema(_ store: any BrokerStore, data: String) async throws -> [String] {
            if let postgres = store as? PostgresStore { return try await postgres.schemaVersions().map(String.init) }
            let file = try DatabaseQueue(path: data + "/node/broker.sqlite")
            return try await file.read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations") }
        }
    }
}
