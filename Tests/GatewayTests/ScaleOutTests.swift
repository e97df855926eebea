import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import TestSupport
import Testing

extension HeavyTests {
    /// Three real `broker serve` processes on one PostgreSQL database and one `broker apns-simulator` process: one
    /// node is killed with SIGKILL in the middle of the day's dispatch and started again later.
    @Suite("Several nodes on PostgreSQL", .timeLimit(.minutes(10)))
    struct ScaleOutTests {
        static let users = 20_000

        /// Reads the shared database the way an operator's `psql` would.
        struct Probe {
            let client: PostgresClient
            let runner: Task<Void, Never>

            init(url: String) throws {
                let components = try #require(URLComponents(string: url))
                let client = PostgresClient(
                    configuration: PostgresClient.Configuration(
                        host: try #require(components.host),
                        port: components.port ?? 5432,
                        username: try #require(components.user),
                        password: nil,
                        database: String(components.path.dropFirst()),
                        tls: .disable
                    )
                )
                self.client = client
                runner = Task { await client.run() }
            }

            /// The integers of the first row of `sql`.
            func integers(_ sql: String) async throws -> [Int] {
                for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)) {
                    return try row.map { try $0.decode(Int?.self) ?? 0 }
                }
                return []
            }

            func rows(_ sql: String) async throws -> [[String]] {
                var rows: [[String]] = []
                for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)) {
                    rows.append(try row.map { try $0.decode(String?.self) ?? "" })
                }
                return rows
            }
        }

        @Test(
            "Three nodes, 20,000 users, one node killed mid-dispatch and restarted: one delivery per user, all pushed, repeats under the same ids"
        )
        func killOneOfThree() async throws {
            try await self.killOneOfThreeAlone()
        }

        private func killOneOfThreeAlone() async throws {
            let data = TestBroker.temporaryDirectory()
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }
            // APNs answers after 50 ms and each node keeps at most 300 pushes in flight: the burst lasts seconds, so
            // the kill lands inside it.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 50}"#).status == 204)

            let url = try await PostgresTestDatabases.make()
            // The password comes from a file, as an operator would keep it (trust authentication ignores it here).
            try "unused-secret\n".write(toFile: data + "/db-password", atomically: true, encoding: .utf8)
            for node in 1...3 {
                let config = """
                    {"dataDirectory": "\(data)/node\(node)", "database": "\(url)?sslmode=disable&pool=6",
                     "databasePasswordFile": "\(data)/db-password",
                     "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "adminToken": "t0ken", "logLevel": "notice",
                     "spreadSeconds": 0, "pushesInFlight": 300, "claimSeconds": 5, "leaseSeconds": 5, "sweepSeconds": 2,
                     "apns": \(simulator.apnsConfiguration)}
                    """
                try config.write(toFile: data + "/node\(node).json", atomically: true, encoding: .utf8)
            }
            let seeding = try await PostgresStore(
                configuration: try PostgresStoreConfiguration(url: url + "?sslmode=disable"),
                logger: TestBroker.logger
            )
            let tokens = try await CrashRecoveryTests.seed(seeding, users: Self.users)
            await seeding.close()
            let probe = try Probe(url: url)
            defer { probe.runner.cancel() }
            func pushed() async throws -> Int {
                try await probe.integers("SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL").first ?? 0
            }

            var nodes = try (1...3).map { try RunningBroker(["serve", "--config", data + "/node\($0).json"]) }
            let started = try await eventually(seconds: 120) { try await pushed() >= Self.users / 5 }
            kill(nodes[0].process.processIdentifier, SIGKILL)
            await nodes[0].process.exited()
            #expect(started, "\(nodes[0].output.suffix(2000))")
            let pushedAtKill = try await pushed()
            #expect(pushedAtKill < Self.users, "the kill came after the burst; it proves nothing")
            // The killed node's claims and leases are left behind; the others take them over when they end. The
            // killed node comes back once the others have gone on pushing without it.
            #expect(try await eventually(seconds: 60) { try await pushed() > pushedAtKill })
            nodes[0] = try RunningBroker(["serve", "--config", data + "/node1.json"])

            let finished = try await eventually(seconds: 240) {
                try await probe.integers(
                    "SELECT COUNT(*) FROM deliveries WHERE kind = 'scheduled' AND settled_at IS NOT NULL AND pushed_at IS NOT NULL"
                ).first == Self.users
            }
            #expect(finished, "\(nodes.map { $0.output.suffix(1500) })")

            // Each node shows itself, the database and its pool in /inspect.
            let adminPort = try #require(try await nodes[1].port(matching: /listener=admin port=(\d+)/))
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            func admin(_ path: String) async throws -> Data {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(adminPort)\(path)")
                request.headers.add(name: "Authorization", value: "Bearer t0ken")
                let response = try await client.execute(request, timeout: .seconds(10))
                return Data(try await response.body.collect(upTo: 4 << 20).readableBytesView)
            }
            let inspect = try JSONSerialization.jsonObject(with: try await admin("/inspect")) as? [String: Any] ?? [:]
            let database = inspect["database"] as? [String: Any]
            #expect((database?["url"] as? String)?.hasPrefix("postgres://broker@") == true, "\(inspect)")
            #expect((database?["pool"] as? [String: Int])?["size"] == 6, "\(inspect)")
            #expect(database?["claims"] as? Int == 0 && database?["leases"] as? Int == 0, "\(inspect)")
            let node = try #require(inspect["node"] as? String)
            let metrics = String(decoding: try await admin("/metrics"), as: UTF8.self)
            #expect(metrics.contains("broker_node_info{node=\"\(node)\"} 1"), "\(metrics)")
            #expect(metrics.contains("broker_store_claims 0") && metrics.contains("broker_store_pool_in_use"))
            try await client.shutdown()
            for node in nodes { #expect(await node.stop() == 0, "\(node.output.suffix(2000))") }

            let ledger = try await probe.integers(
                """
                SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT local_date), COUNT(pushed_at),
                    COUNT(*) FILTER (WHERE settled_at IS NULL)
                FROM deliveries WHERE kind = 'scheduled'
                """
            )
            #expect(ledger == [Self.users, Self.users, 1, Self.users, 0])
            #expect(try await probe.integers("SELECT COUNT(*) FROM deliveries").first == Self.users)

            // The simulator's record: every delivery accepted at least once, to its user's device; a delivery pushed
            // more than once (by the killed node, then by another) carried the same collapse id and apns-id each time.
            var owners: [String: (user: Int64, apnsID: String)] = [:]
            for row in try await probe.rows("SELECT id::text, user_id::text, apns_id FROM deliveries") {
                owners["impulse-\(row[0])"] = (Int64(row[1]) ?? 0, row[2])
            }
            let pushes = try await simulator.acceptedPushes()
            var apnsIDs: [String: Set<String>] = [:]
            for push in pushes {
                let collapse = push["collapseID"] as? String ?? "none"
                let owner = try #require(owners[collapse], "a push for no delivery: \(collapse)")
                #expect(push["token"] as? String == tokens[owner.user])
                apnsIDs[collapse, default: []].insert(push["apnsID"] as? String ?? "")
            }
            #expect(apnsIDs.count == Self.users)
            #expect(apnsIDs.allSatisfy { $0.value.count == 1 }, "a repeat under another apns-id")
            #expect(apnsIDs.allSatisfy { owners[$0.key]?.apnsID == $0.value.first })
            let repeats = pushes.count - Self.users
            #expect(repeats <= Self.users - pushedAtKill)
        }
    }
}
