import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import NIOCore
import NIOPosix
import TestSupport
import Testing

extension HeavyTests {
    /// Real `broker serve` nodes on one PostgreSQL database, each with its own data folder (as on separate machines:
    /// they share nothing but the database), pushing to one `broker apns-simulator` process that refuses a key's
    /// token when it changes more often than every 20 minutes.
    @Suite("Nodes on separate machines", .timeLimit(.minutes(10)))
    struct ClusterTests {
        /// Three nodes' configurations (each its own data folder, `settings` added to the defaults), a database seeded
        /// with `users` due now, and a simulator answering after `delayMilliseconds`.
        struct Cluster {
            let data: String
            let simulator: SimulatorUnderTest
            let probe: ScaleOutTests.Probe

            static func start(users: Int, delayMilliseconds: Int, settings: String) async throws -> Cluster {
                let data = TestBroker.temporaryDirectory()
                let simulator = try await SimulatorUnderTest.start(data: data)
                let faults = #"{"delayMilliseconds": \#(delayMilliseconds)}"#
                #expect(try await simulator.call("PUT", "/_simulator/faults", faults).status == 204)
                let url = try await PostgresTestDatabases.make()
                for node in 1...3 {
                    let config = """
                        {"dataDirectory": "\(data)/node\(node)", "database": "\(url)?sslmode=disable&pool=6",
                         "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "adminToken": "t0ken", "logLevel": "notice",
                         "spreadSeconds": 0, "pushesInFlight": 250, \(settings),
                         "apns": \(simulator.apnsConfiguration)}
                        """
                    try config.write(toFile: data + "/node\(node).json", atomically: true, encoding: .utf8)
                }
                let seeding = try await PostgresStore(
                    configuration: try PostgresStoreConfiguration(url: url + "?sslmode=disable"),
                    logger: TestBroker.logger
                )
                _ = try await CrashRecoveryTests.seed(seeding, users: users)
                await seeding.close()
                return Cluster(data: data, simulator: simulator, probe: try ScaleOutTests.Probe(url: url))
            }

            func node(_ number: Int) throws -> RunningBroker {
                try RunningBroker(["serve", "--config", data + "/node\(number).json"])
            }

            func pushed() async throws -> Int {
                try await probe.integers("SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL").first ?? 0
            }

            /// What the simulator recorded: pushes accepted and refused.
            func record() async throws -> (accepted: Int, rejected: Int) {
                let listing = try await simulator.call("GET", "/_simulator/accepted?limit=1")
                let json =
                    try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
                return (json?["accepted"] as? Int ?? -1, json?["rejected"] as? Int ?? -1)
            }

            func stop() {
                probe.runner.cancel()
                simulator.terminate()
            }
        }

        /// A loopback port nothing listens on (bound, read and closed: connections to it are refused).
        static func closedPort() async throws -> Int {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: 0).get()
            let port = channel.localAddress?.port ?? 1
            try await channel.close()
            return port
        }

        /// A page of a node's admin listener.
        static func adminGet(_ node: RunningBroker, _ path: String, client: HTTPClient) async throws -> String {
            guard let port = try await node.port(matching: /listener=admin port=(\d+)/) else { return "" }
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            request.headers.add(name: "Authorization", value: "Bearer t0ken")
            let response = try await client.execute(request, timeout: .seconds(10))
            return String(buffer: try await response.body.collect(upTo: 4 << 20))
        }

        /// The pushes APNs accepted from one node, from its `/metrics`.
        static func acceptedPushes(_ node: RunningBroker, client: HTTPClient) async throws -> Int {
            let text = try await adminGet(node, "/metrics", client: client)
            return text.split(separator: "\n").filter {
                $0.hasPrefix("broker_push_sent_total") && $0.contains("outcome=\"accepted\"")
            }.reduce(0) { $0 + (Int(Double($1.split(separator: " ").last ?? "0") ?? 0)) }
        }

        @Test("Three nodes started one after another send one provider token: APNs refuses none of their pushes")
        func oneProviderToken() async throws {
            try await self.oneProviderTokenAlone()
        }

        private func oneProviderTokenAlone() async throws {
            let users = 6_000
            // Answers after 500 ms, 250 in flight per node: one node alone would take 12 s or more, so all three push.
            let cluster = try await Cluster.start(
                users: users,
                delayMilliseconds: 500,
                settings: #""claimSeconds": 120, "leaseSeconds": 60"#
            )
            defer { cluster.stop() }
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }

            // The second node starts once the first is pushing, the third once the second is: their own tokens would be
            // seconds apart. (The third may find every delivery taken by then; two pushing nodes prove the point.)
            var nodes: [RunningBroker] = []
            // Whatever ends the test (an early return, a thrown error), no node outlives it.
            defer { for node in nodes { node.terminate() } }
            for node in 1...3 {
                nodes.append(try cluster.node(node))
                guard node < 3 else { break }
                let pushing = try await eventually(seconds: 60) {
                    try await Self.acceptedPushes(nodes[node - 1], client: client) > 0
                }
                #expect(pushing, "node \(node): \(nodes[node - 1].output.suffix(3000))")
                if !pushing { return }
            }
            let finished = try await eventually(seconds: 240) { try await cluster.pushed() == users }
            let count = try await cluster.pushed()
            #expect(finished, "\(count) of \(users): \(nodes.map { $0.output.suffix(1500) })")
            for node in nodes { #expect(await node.stop() == 0, "\(node.output.suffix(2000))") }

            let record = try await cluster.record()
            #expect(record.rejected == 0 && record.accepted == users, "\(record)")
            #expect(try await cluster.probe.integers("SELECT COUNT(*) FROM provider_tokens").first == 1)
        }

        @Test("A node that cannot reach APNs hands its leased and claimed work to a node that can")
        func failingNodeHandsBack() async throws {
            try await self.failingNodeHandsBackAlone()
        }

        private func failingNodeHandsBackAlone() async throws {
            let users = 2_000
            // Claims, leases and sweeps of ten minutes: only the hand-back can free the failing node's work in time.
            let cluster = try await Cluster.start(
                users: users,
                delayMilliseconds: 50,
                settings:
                    #""claimSeconds": 600, "leaseSeconds": 600, "sweepSeconds": 600, "heartbeatSeconds": 1, "nodeSilenceSeconds": 5, "pushGiveUpSeconds": 3"#
            )
            defer { cluster.stop() }
            // Node 1's APNs is a port nothing listens on: every push fails without an answer.
            let closed = try await Self.closedPort()
            let config = try String(contentsOfFile: cluster.data + "/node1.json", encoding: .utf8)
            try config.replacingOccurrences(
                of: "\"production\": \"127.0.0.1:\(cluster.simulator.port)\"",
                with: "\"production\": \"127.0.0.1:\(closed)\""
            )
            .write(toFile: cluster.data + "/node1.json", atomically: true, encoding: .utf8)
            var nodes: [RunningBroker] = []
            defer { for node in nodes { node.terminate() } }
            nodes.append(try cluster.node(1))
            // It takes work it cannot push: due rows become deliveries leased to it.
            let recorded = try await eventually(seconds: 60) {
                try await cluster.probe.integers("SELECT COUNT(*) FROM deliveries").first ?? 0 > 0
            }
            #expect(recorded, "\(nodes[0].output.suffix(3000))")
            nodes.append(try cluster.node(2))
            let finished = try await eventually(seconds: 120) { try await cluster.pushed() == users }
            let count = try await cluster.pushed()
            #expect(finished, "\(count) of \(users): \(nodes.map { $0.output.suffix(2000) })")
            #expect(nodes[0].output.contains("work handed to the other nodes"), "\(nodes[0].output.suffix(3000))")
            // Its /inspect says since when its pushes fail.
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let inspect = try await Self.adminGet(nodes[0], "/inspect", client: client)
            #expect(inspect.contains("\"failingSince\""), "\(inspect.prefix(2000))")
            for node in nodes { #expect(await node.stop() == 0, "\(node.output.suffix(2000))") }
            let record = try await cluster.record()
            #expect(record.accepted == users, "\(record)")
            #expect(try await cluster.probe.integers("SELECT COUNT(*) FROM deliveries").first == users)
        }

        @Test(
            "A node stopped mid-burst hands its work back, a killed one loses it within seconds: claims, leases and sweeps of ten minutes do not hold the rest"
        )
        func takeover() async throws {
            try await self.takeoverAlone()
        }

        private func takeoverAlone() async throws {
            let users = 10_000
            // Answers after 300 ms, at most 64 streams per node (the simulator allows 16 per connection): the burst lasts
            // well beyond both events. Claims, leases and sweeps of ten minutes: only the heartbeat (3 s, silence 10 s)
            // and the hand-back can free a gone node's work within the test.
            let cluster = try await Cluster.start(
                users: users,
                delayMilliseconds: 300,
                settings:
                    #""claimSeconds": 600, "leaseSeconds": 600, "sweepSeconds": 600, "heartbeatSeconds": 3, "nodeSilenceSeconds": 10"#
            )
            defer { cluster.stop() }
            let pushed = cluster.pushed
            let nodes = try (1...3).map { try cluster.node($0) }
            defer { for node in nodes { node.terminate() } }

            // Node 2 stops gracefully a fifth of the way in: what it had not pushed goes to the others at once.
            let fifth = try await eventually(seconds: 120) { try await pushed() >= users / 5 }
            #expect(fifth, "\(nodes.map { $0.output.suffix(1500) })")
            #expect(await nodes[1].stop() == 0, "\(nodes[1].output.suffix(2000))")
            #expect(
                nodes[1].output.contains("this node's claims and leases handed back"),
                "\(nodes[1].output.suffix(2000))"
            )
            // Node 1 is killed at half: its claims and leases end when it has been silent for 10 s.
            let half = try await eventually(seconds: 120) { try await pushed() >= users / 2 }
            #expect(half)
            kill(nodes[0].process.processIdentifier, SIGKILL)
            await nodes[0].process.exited()
            let pushedAtKill = try await pushed()
            #expect(pushedAtKill < users, "the kill came after the burst; it proves nothing")

            // Node 3 finishes the day within minutes, not the ten of the claims and leases.
            let finished = try await eventually(seconds: 180) { try await pushed() == users }
            let count = try await pushed()
            #expect(finished, "\(count) of \(users): \(nodes[2].output.suffix(3000))")
            #expect(
                nodes[2].output.contains("a silent node's claims and leases ended"),
                "\(nodes[2].output.suffix(3000))"
            )
            #expect(await nodes[2].stop() == 0)
            let ledger = try await cluster.probe.integers(
                """
                SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(pushed_at), COUNT(*) FILTER (WHERE settled_at IS NULL)
                FROM deliveries WHERE kind = 'scheduled'
                """
            )
            #expect(ledger == [users, users, users, 0])
            // Repeats come only from the killed node's pushes in flight (250 at most), never from the stopped one.
            let accepted = try await cluster.record().accepted
            #expect(accepted >= users && accepted - users <= 250, "\(accepted - users) repeats")
        }
    }
}
