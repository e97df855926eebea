import AsyncHTTPClient
import Crypto
import Engine
import Foundation
import GRDB
import Gateway
import NIOCore
import NIOPosix
import NIOSSL
import TestSupport
import Testing

extension HeavyTests {
    /// The real `broker serve` process, killed with SIGKILL in the middle of a dispatch burst and started again on
    /// the same SQLite file, pushing to a separate `broker apns-simulator` process that outlives both runs.
    @Suite("Crash recovery", .timeLimit(.minutes(10)))
    struct CrashRecoveryTests {
        static let users = 10_000

        @Test(
            "SIGKILL during a 10,000-user dispatch, then restart: one entry per user for the day, all pushed, same collapse id"
        )
        func killDuringDispatch() async throws {
            try await self.killDuringDispatchAlone()
        }

        private func killDuringDispatchAlone() async throws {
            let data = TestBroker.temporaryDirectory()
            // Few streams and a small delay per answer make the burst last seconds, so the kill lands inside it.
            let simulator = try await SimulatorUnderTest.start(data: data)
            defer { simulator.terminate() }
            // APNs answers after 100 ms, and the broker keeps at most 500 pushes in flight: the burst takes two seconds
            // or more, so the kill lands inside it even when the suite's other tests load the machine.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 100}"#).status == 204)

            let config = """
                {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "warning", "spreadSeconds": 0, "pushesInFlight": 500,
                 "apns": \(simulator.apnsConfiguration)}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            let tokens = try await seed(directory: data + "/broker")
            let database = try DatabaseQueue(path: data + "/broker/broker.sqlite")

            // First run: killed once a good part of the burst is through, but not all of it.
            let first = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let started = try await eventually(seconds: 120) {
                try await database.read {
                    try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries WHERE pushed_at IS NOT NULL") ?? 0
                } >= 1500
            }
            kill(first.process.processIdentifier, SIGKILL)
            await first.process.exited()
            #expect(started, "\(first.output)")
            let atKill = try database.read { db in
                try Row.fetchOne(
                    db,
                    sql:
                        "SELECT COUNT(*) AS assigned, COUNT(pushed_at) AS pushed FROM deliveries WHERE kind = 'scheduled'"
                )
            }
            let pushedAtKill: Int = atKill?["pushed"] ?? 0
            #expect(pushedAtKill < Self.users, "the kill came after the burst; it proves nothing")

            // Second run on the same data: it finishes the day without recording anything twice.
            let second = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let finished = try await eventually(seconds: 180) {
                try await database.read {
                    try Int.fetchOne(
                        $0,
                        sql: "SELECT COUNT(*) FROM deliveries WHERE kind = 'scheduled' AND pushed_at IS NOT NULL"
                    ) ?? 0
                } == Self.users
            }
            #expect(finished, "\(second.output.suffix(2000))")
            #expect(await second.stop() == 0)  // SIGTERM: graceful, exit status 0

            let ledger = try #require(
                try database.read { db in
                    try Row.fetchOne(
                        db,
                        sql: """
                            SELECT COUNT(*) AS n, COUNT(DISTINCT user_id) AS users, COUNT(DISTINCT local_date) AS days,
                                COUNT(pushed_at) AS pushed, SUM(settled_at IS NULL) AS unsettled
                            FROM deliveries WHERE kind = 'scheduled'
                            """
                    )
                }
            )
            #expect(ledger["n"] as Int? == Self.users)
            #expect(ledger["users"] as Int? == Self.users)
            #expect(ledger["days"] as Int? == 1)
            #expect(ledger["pushed"] as Int? == Self.users)
            #expect(ledger["unsettled"] as Int? == 0)
            #expect(
                try await database.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries") } == Self.users
            )

            // The simulator's record: every delivery accepted at least once, resends under the delivery's collapse id
            // and to its user's device.
            let owners = try await database.read { db in
                try Row.fetchAll(db, sql: "SELECT id, user_id FROM deliveries").reduce(into: [String: Int64]()) {
                    $0["impulse-\($1["id"] as Int64)"] = $1["user_id"]
                }
            }
            let pushes = try await simulator.acceptedPushes()
            var perDelivery: [String: Int] = [:]
            for push in pushes {
                let collapse = push["collapseID"] as? String ?? "none"
                perDelivery[collapse, default: 0] += 1
                let owner = try #require(owners[collapse], "a push for no delivery: \(collapse)")
                #expect(push["token"] as? String == tokens[owner])
            }
            #expect(perDelivery.count == Self.users)
            #expect(pushes.count >= Self.users)
            // Resends happen only for deliveries whose outcome the killed run had not written.
            #expect(pushes.count - Self.users <= Self.users - pushedAtKill)
        }

        @Test(
            "SIGKILL during a dispatch to iPhones and Android phones, then restart: each device gets the day's impulse, one delivery per user"
        )
        func killDuringDispatchOnBothChannels() async throws {
            try await self.killDuringDispatchOnBothChannelsAlone()
        }

        private func killDuringDispatchOnBothChannelsAlone() async throws {
            let users = 4_000
            let data = TestBroker.temporaryDirectory()
            let account = FCMServiceAccount(
                projectID: "acme-crash",
                clientEmail: "broker@acme-crash.iam.gserviceaccount.com",
                privateKeyID: "crash",
                key: try FCMTests.key()
            )
            try account.json().write(to: URL(fileURLWithPath: data + "/service-account.json"))
            let simulator = try await SimulatorUnderTest.start(data: data, fcmAccount: data + "/service-account.json")
            defer { simulator.terminate() }
            // Both sides answer after 100 ms and the broker keeps at most 200 pushes in flight: 6,000 pushes take three
            // seconds or more, so the kill lands inside the burst.
            #expect(try await simulator.call("PUT", "/_simulator/faults", #"{"delayMilliseconds": 100}"#).status == 204)
            let config = """
                {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "warning", "spreadSeconds": 0, "pushesInFlight": 200, "pushBatchSize": 100,
                 "apns": \(simulator.apnsConfiguration), "fcm": \(simulator.fcmConfiguration(account: data + "/service-account.json"))}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(atPath: data + "/broker", withIntermediateDirectories: true)
            let store = try await SQLiteStore(
                configuration: .init(path: data + "/broker/broker.sqlite"),
                logger: TestBroker.logger
            )
            let tokens = try await Self.seedBothChannels(store, users: users)
            let database = try DatabaseQueue(path: data + "/broker/broker.sqlite")
            func pushed() async throws -> Int {
                try await database.read {
                    try Int.fetchOne(
                        $0,
                        sql: "SELECT COUNT(*) FROM deliveries WHERE kind = 'scheduled' AND pushed_at IS NOT NULL"
                    ) ?? 0
                }
            }

            let first = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let started = try await eventually(seconds: 120) { try await pushed() >= 800 }
            kill(first.process.processIdentifier, SIGKILL)
            await first.process.exited()
            #expect(started, "\(first.output)")
            let pushedAtKill = try await pushed()
            #expect(pushedAtKill < users, "the kill came after the burst; it proves nothing")

            let second = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let finished = try await eventually(seconds: 180) { try await pushed() == users }
            #expect(finished, "\(second.output.suffix(2000))")
            #expect(await second.stop() == 0)

            // One delivery per user and day, all settled.
            let ledger = try #require(
                try await database.read { db in
                    try Row.fetchOne(
                        db,
                        sql: """
                            SELECT COUNT(*) AS n, COUNT(DISTINCT user_id) AS users, COUNT(DISTINCT local_date) AS days,
                                SUM(settled_at IS NULL) AS unsettled
                            FROM deliveries
                            """
                    )
                }
            )
            #expect(ledger["n"] as Int? == users && ledger["users"] as Int? == users)
            #expect(ledger["days"] as Int? == 1 && ledger["unsettled"] as Int? == 0)
            let owners = try await database.read { db in
                try Row.fetchAll(db, sql: "SELECT id, user_id FROM deliveries").reduce(into: [String: Int64]()) {
                    $0["impulse-\($1["id"] as Int64)"] = $1["user_id"]
                }
            }
            // Every iPhone got its user's delivery, every Android phone too, each under the delivery's collapse id;
            // resends only for deliveries the killed run had not settled.
            let apns = try await simulator.acceptedPushes()
            var apnsDeliveries = Set<String>()
            for push in apns {
                let collapse = push["collapseID"] as? String ?? "none"
                let owner = try #require(owners[collapse], "a push for no delivery: \(collapse)")
                #expect(push["token"] as? String == tokens.apns[owner])
                apnsDeliveries.insert(collapse)
            }
            #expect(apnsDeliveries.count == users)
            let fcm = try await simulator.acceptedMessages()
            var fcmDeliveries = Set<String>()
            for message in fcm {
                let collapse = message["collapseKey"] as? String ?? "none"
                let owner = try #require(owners[collapse], "a message for no delivery: \(collapse)")
                #expect(message["token"] as? String == tokens.fcm[owner])
                #expect(
                    (message["data"] as? [String: String])?["delivery_id"]
                        == String(collapse.dropFirst("impulse-".count))
                )
                fcmDeliveries.insert(collapse)
            }
            #expect(fcmDeliveries.count == tokens.fcm.count)
            #expect(apns.count - users <= users - pushedAtKill)
            #expect(fcm.count - tokens.fcm.count <= users - pushedAtKill)
        }

        @Test("SIGTERM while APNs is unreachable: the broker exits cleanly and every unpushed delivery stays unsettled")
        func gracefulShutdownWithAPNsDown() async throws {
            let data = TestBroker.temporaryDirectory()
            let key = P256.Signing.PrivateKey()
            try key.pemRepresentation.write(toFile: data + "/AuthKey.p8", atomically: true, encoding: .utf8)
            // Nothing listens on port 1: every connect fails, and pushes wait in the APNs client's backoff.
            let config = """
                {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "warning", "spreadSeconds": 0,
                 "shutdownGraceSeconds": 30,
                 "apns": {"mode": "external", "production": "127.0.0.1:1", "serverHostname": "localhost",
                          "credential": {"teamID": "TEAM000001", "keyID": "KEY0000001", "keyFile": "\(data)/AuthKey.p8"}}}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            _ = try await seed(directory: data + "/broker", users: 500)
            let database = try DatabaseQueue(path: data + "/broker/broker.sqlite")
            let broker = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let assigned = try await eventually(seconds: 60) {
                try await database.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries") ?? 0 } == 500
            }
            #expect(assigned, "\(broker.output)")
            // Stop once the client has failed for a while (backoffs of seconds, pushes waiting for the next attempt).
            #expect(try await eventually(seconds: 60) { broker.output.contains("APNs unreachable") })
            try await Task.sleep(for: .seconds(3))
            #expect(await broker.stop() == 0, "\(broker.output.suffix(3000))")  // a fatal error would be signal 4
            let row = try #require(
                try database.read {
                    try Row.fetchOne(
                        $0,
                        sql: "SELECT COUNT(pushed_at) AS pushed, SUM(settled_at IS NULL) AS open FROM deliveries"
                    )
                }
            )
            #expect(row["pushed"] as Int? == 0)
            #expect(row["open"] as Int? == 500)  // handed back: the next start pushes them
        }

        /// How an APNs that hangs looks to the broker.
        enum Hang: String, CaseIterable, CustomTestStringConvertible {
            /// TCP connections are accepted and never answered: the TLS handshake hangs.
            case silentSocket
            /// TLS and HTTP/2 work, but no stream is ever answered.
            case unansweredStreams
            var testDescription: String { rawValue }
        }

        @Test(
            "SIGTERM while APNs hangs: the broker stops when the grace period runs out, without a fatal error",
            arguments: Hang.allCases
        )
        func gracefulShutdownWithAPNsHanging(_ hang: Hang) async throws {
            let data = TestBroker.temporaryDirectory()
            let key = P256.Signing.PrivateKey()
            try key.pemRepresentation.write(toFile: data + "/AuthKey.p8", atomically: true, encoding: .utf8)
            var apnsPort: Int
            var simulator: RunningBroker?
            var silent: (any Channel)?
            var trust = ""
            switch hang {
            case .silentSocket:
                let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
                    .bind(host: "127.0.0.1", port: 0).get()
                silent = channel
                apnsPort = try #require(channel.localAddress?.port)
            case .unansweredStreams:
                let running = try RunningBroker([
                    "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data + "/sim", "--key",
                    "KEY0000001=\(data)/AuthKey.p8", "--topic", "com.acme.impulse", "--log-level", "error",
                ])
                simulator = running
                apnsPort = try #require(try await running.port(matching: #/127\.0\.0\.1:(\d+) /#))
                trust = #""trustRoots": "\#(data)/sim/tls/self-signed.crt","#
                var simulatorTLS = TLSConfiguration.makeClientConfiguration()
                simulatorTLS.trustRoots = .file(data + "/sim/tls/self-signed.crt")
                let control = try await HTTP2ClientConnection.connect(
                    host: "127.0.0.1",
                    port: apnsPort,
                    tls: simulatorTLS,
                    serverHostname: "localhost"
                )
                let answer = try await control.send(
                    [
                        HTTP2Header(":method", "PUT"), HTTP2Header(":scheme", "https"),
                        HTTP2Header(":path", "/_simulator/faults"), HTTP2Header(":authority", "localhost"),
                        RunningBroker.controlAuthorization,
                    ],
                    body: ByteBuffer(string: #"{"hangNext": 1000000}"#),
                    deadline: .seconds(30)
                )
                #expect(answer.status == 204)
                await control.close()
            }
            defer {
                simulator?.terminate()
                silent?.close(promise: nil)
            }
            // APNs requests wait 15 s for an answer and connects 10 s: far beyond the grace period and the 5 s that
            // ServiceLifecycle allows for cancellation after it.
            let config = """
                {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0", "logLevel": "notice", "spreadSeconds": 0,
                 "shutdownGraceSeconds": 2,
                 "apns": {"mode": "external", "production": "127.0.0.1:\(apnsPort)", "serverHostname": "localhost", \(trust)
                          "credential": {"teamID": "TEAM000001", "keyID": "KEY0000001", "keyFile": "\(data)/AuthKey.p8"}}}
                """
            try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
            _ = try await seed(directory: data + "/broker", users: 50)
            let database = try DatabaseQueue(path: data + "/broker/broker.sqlite")
            let broker = try RunningBroker(["serve", "--config", data + "/broker.json"])
            let assigned = try await eventually(seconds: 60) {
                try await database.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM deliveries") ?? 0 } == 50
            }
            #expect(assigned, "\(broker.output)")
            // The pushes are waiting on APNs (for a connection, or for answers) when the signal comes.
            let adminPort = try #require(try await broker.port(matching: /listener=admin port=(\d+)/))
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let waiting = try await eventually(seconds: 30) {
                let response = try await client.execute(
                    HTTPClientRequest(url: "http://127.0.0.1:\(adminPort)/inspect"),
                    timeout: .seconds(10)
                )
                let body = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
                let view = try JSONSerialization.jsonObject(with: body) as? [String: Any]
                return (view?["pushesInFlight"] as? Int ?? 0) > 0
            }
            try await client.shutdown()
            #expect(waiting)
            let stopping = ContinuousClock.now
            // Before APNs calls honoured cancellation, this ended in ServiceLifecycle's fatal error (signal 4).
            #expect(await broker.stop() == 0, "\(broker.output.suffix(3000))")
            #expect(stopping.duration(to: .now) < .seconds(15))  // grace 2 s, then at most 5 s of cancellation
            #expect(broker.output.contains("stopped"), "\(broker.output.suffix(3000))")
            let open = try await database.read {
                try Int.fetchOne(
                    $0,
                    sql: "SELECT COUNT(*) FROM deliveries WHERE settled_at IS NULL AND pushed_at IS NULL"
                )
            }
            #expect(open == 50)  // handed back: the next start pushes them
        }

        /// A tenant whose users are all due now (UTC, this minute), each with one device; returns tokens by user.
        func seed(directory: String, users: Int = CrashRecoveryTests.users) async throws -> [Int64: String] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let store = try await SQLiteStore(
                configuration: .init(path: directory + "/broker.sqlite"),
                logger: TestBroker.logger
            )
            return try await Self.seed(store, users: users)
        }

        /// A tenant `acme` whose `users` users are all due this minute (UTC), with one device each (an iPhone, or
        /// with `channel` an Android phone); returns each user's token.
        static func seed(
            _ store: any BrokerStore,
            users: Int,
            channel: PushChannel = .apns
        ) async throws -> [Int64: String] {
            let acme = try TenantID("acme")
            try await store.createTenant(
                try Tenant(id: acme, name: "Acme", defaultTimeZone: "UTC", apnsTopic: "com.acme.impulse")
            )
            _ = try await store.importImpulses(
                try ["breathe", "walk", "sleep", "call", "budget", "water"].map { try Fixture.impulse(acme, $0) },
                tenant: acme
            )
            let now = Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: Date())
            let minute = try LocalTime(hour: now.hour ?? 0, minute: now.minute ?? 0)
            let created = try await store.createUsers(
                try (1...users).map {
                    try NewUser(
                        tenant: acme,
                        username: "user\($0)",
                        passwordHash: "unused",
                        preferences: DeliveryPreferences(timeZone: "UTC", deliveryTime: minute)
                    )
                }
            )
            var tokens: [Int64: String] = [:]
            _ = try await store.registerDevices(
                try created.map { user in
                    let token =
                        switch channel {
                        case .apns: String(format: "%064llx", UInt64(user.id.rawValue) &* 0x9E37_79B9_7F4A_7C15)
                        case .fcm:
                            "seed-\(user.id.rawValue):APA91b" + String(format: "%016llx", UInt64(user.id.rawValue))
                        }
                    tokens[user.id.rawValue] = token
                    return try Device(
                        tenant: acme,
                        topic: "com.acme.impulse",
                        token: DeviceToken(token, channel: channel),
                        owner: user.id,
                        name: "phone",
                        environment: .production,
                        registeredAt: Date(),
                        channel: channel
                    )
                }
            )
            return tokens
        }

        /// As `seed`, and every other user also carries an Android phone: each user's iPhone token, and the Android
        /// users' FCM tokens.
        static func seedBothChannels(
            _ store: any BrokerStore,
            users: Int
        ) async throws -> (apns: [Int64: String], fcm: [Int64: String]) {
            let tokens = try await seed(store, users: users)
            var androids: [Int64: String] = [:]
            _ = try await store.registerDevices(
                try tokens.keys.filter { $0 % 2 == 0 }.map { user in
                    let token = "crash-\(user):APA91b" + String(format: "%016llx", UInt64(user))
                    androids[user] = token
                    return try Device(
                        tenant: try TenantID("acme"),
                        topic: "com.acme.impulse",
                        token: DeviceToken(token, channel: .fcm),
                        owner: UserID(user),
                        name: "android",
                        environment: .production,
                        registeredAt: Date(),
                        channel: .fcm
                    )
                }
            )
            return (tokens, androids)
        }
    }
}
