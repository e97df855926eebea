import Engine
import Foundation
import NIOPosix
import TestSupport
import Testing

@testable import Gateway

/// Where webhook attempts may connect, decided at each attempt from what the host resolves to: a public name
/// that resolves to this machine is refused without saying where it points, and an allowed one is reached at the
/// very address that was checked (the connection is pinned, the name kept for TLS).
@Suite("Webhook targets", .timeLimit(.minutes(3)))
struct WebhookTargetTests {
    /// The resolver of these tests: `hooks.example.com` (a public name, so registration takes it) points to
    /// this machine, as a DNS rebinding attacker would make it.
    static let resolve: @Sendable (String) async throws -> [NetworkAddress] = { host in
        host == "hooks.example.com"
            ? [NetworkAddress(literal: "127.0.0.1")!] : try await WebhookConnector.systemResolve(host)
    }

    static func configuration(_ receiver: WebhookTests.Receiver, allowPrivate: Bool) -> WebhookConfiguration {
        var configuration = WebhookTests.configuration(receiver)
        configuration.policy = WebhookTargetPolicy(allowPrivateAddresses: allowPrivate)
        configuration.resolve = Self.resolve
        return configuration
    }

    func userCreated(_ broker: TestBroker, _ name: String) async throws {
        let user = try await broker.send(
            .POST,
            "/t/acme/admin/v1/users",
            user: "root",
            headers: [("Content-Type", "application/json")],
            body: #"{"username": "\#(name)", "password": "h00k-pass"}"#
        )
        #expect(user.status == 201, "\(user.text)")
    }

    @Test("A public name resolving to this machine is refused at the attempt; the error names no address or port")
    func rebindingRefused() async throws {
        let receiver = try await WebhookTests.Receiver(hostnames: ["hooks.example.com"])
        defer { Task { await receiver.close() } }
        let port = receiver.server.localAddress?.port ?? 0
        try await TestBroker.run(webhooks: Self.configuration(receiver, allowPrivate: false)) { broker in
            let created = try await WebhookTests().register(
                broker,
                #"{"url": "https://hooks.example.com:\#(port)/hooks/impulse", "events": ["user.created"]}"#
            )
            #expect(created.status == 201, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            try await userCreated(broker, "rebound")
            var log: [[String: Any]] = []
            #expect(
                try await eventually {
                    log = try await WebhookTests().attempts(broker, id)
                    return !log.isEmpty
                }
            )
            let error = log.first?["error"] as? String ?? ""
            #expect(error.contains("may not reach"), "\(error)")
            #expect(!error.contains("127.0.0.1") && !error.contains(String(port)), "\(error)")
            #expect(receiver.received.isEmpty)
        }
    }

    @Test("Allowed, the name reaches the checked address, with its own name for TLS")
    func pinnedWhenAllowed() async throws {
        let receiver = try await WebhookTests.Receiver(hostnames: ["hooks.example.com"])
        defer { Task { await receiver.close() } }
        let port = receiver.server.localAddress?.port ?? 0
        try await TestBroker.run(webhooks: Self.configuration(receiver, allowPrivate: true)) { broker in
            let created = try await WebhookTests().register(
                broker,
                #"{"url": "https://hooks.example.com:\#(port)/hooks/impulse", "events": ["user.created"]}"#
            )
            #expect(created.status == 201, "\(created.text)")
            try await userCreated(broker, "pinned")
            #expect(try await eventually { receiver.taken.count == 1 }, "\(receiver.received.map(\.status))")
        }
    }

    @Test("A closed port reads as a failed connect, without its address or port")
    func noPortScan() async throws {
        let receiver = try await WebhookTests.Receiver()
        defer { Task { await receiver.close() } }
        // A port that was free a moment ago: nothing listens there.
        let closed = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = closed.localAddress?.port ?? 0
        try await closed.close()
        try await TestBroker.run(webhooks: WebhookTests.configuration(receiver)) { broker in
            let created = try await WebhookTests().register(
                broker,
                #"{"url": "https://localhost:\#(port)/hooks", "events": ["user.created"]}"#
            )
            let id = try #require(created.json["id"] as? String)
            try await userCreated(broker, "scanner")
            var log: [[String: Any]] = []
            #expect(
                try await eventually {
                    log = try await WebhookTests().attempts(broker, id)
                    return !log.isEmpty
                }
            )
            #expect(log.first?["error"] as? String == "could not connect to the endpoint over TLS", "\(log)")
        }
    }
}

/// One tenant's dead endpoints and another tenant's events: the dispatcher's slots are shared per tenant.
@Suite("Webhook shares between tenants", .timeLimit(.minutes(3)))
struct WebhookShareTests {
    @Test("Shares: the room left for each busy tenant, full endpoints, and what is free in all")
    func shares() throws {
        let shares = WebhookShares(concurrency: 32, perEndpoint: 4, perTenant: 8)
        let acme = try TenantID("acme")
        let room = shares.room(endpoints: ["a": 4, "b": 3, "c": 1], tenants: [acme: 8])
        #expect(room.free == 24 && room.fullEndpoints == ["a"])
        let globex = try TenantID("globex")
        #expect(room.room(for: acme) == 0 && room.room(for: globex) == 8)
        #expect(WebhookShares(concurrency: 4, perEndpoint: 8, perTenant: 2).perTenant == 4)
    }

    func port(_ receiver: WebhookTests.Receiver) -> Int { receiver.server.localAddress?.port ?? 0 }

    @Test(
        "A tenant whose ten endpoints hang holds its share of attempts, and another tenant's event goes at once",
        arguments: TestDatabase.allCases
    )
    func deadEndpointsDoNotStarveOthers(_ database: TestDatabase) async throws {
        // Two names (two certificate subjects a trust store tells apart), both on this machine.
        let dead = try await WebhookTests.Receiver(hostnames: ["dead.example.com"])
        let alive = try await WebhookTests.Receiver(hostnames: ["alive.example.com"])
        defer {
            Task {
                await dead.close()
                await alive.close()
            }
        }
        dead.set(.hang)
        // One file trusting both receivers' certificates.
        let trust = TestBroker.temporaryDirectory() + "/receivers.crt"
        try
            (try String(contentsOfFile: dead.certificateFile, encoding: .utf8) + "\n"
            + String(contentsOfFile: alive.certificateFile, encoding: .utf8) + "\n")
            .write(toFile: trust, atomically: true, encoding: .utf8)
        var configuration = WebhookTests.configuration(dead)
        configuration.trustRootsFile = trust
        configuration.resolve = { _ in [NetworkAddress(literal: "127.0.0.1")!] }
        // Attempts hang for 8 s: everything below happens while acme's first attempts are still in flight.
        configuration.timeout = .seconds(8)
        let operatorAuth = ("Authorization", "Bearer \(Fixture.operatorToken)")
        try await TestBroker.run(database: database, webhooks: configuration) { broker in
            for index in 0..<10 {
                let created = try await WebhookTests().register(
                    broker,
                    #"{"url": "https://dead.example.com:\#(port(dead))/hooks/\#(index)", "events": ["user.created"]}"#
                )
                #expect(created.status == 201, "\(created.text)")
            }
            // Four users: four lines of events on each of the ten endpoints, forty attempts due at once.
            for index in 0..<4 { try await WebhookTargetTests().userCreated(broker, "flood-\(index)") }
            #expect(try await eventually { dead.received.count >= 8 })
            let globex = try await broker.send(
                .POST,
                "/t/globex/admin/v1/webhooks",
                user: nil,
                headers: [operatorAuth, ("Content-Type", "application/json")],
                body: #"{"url": "https://alive.example.com:\#(port(alive))/hooks", "events": ["user.created"]}"#
            )
            #expect(globex.status == 201, "\(globex.text)")
            let user = try await broker.send(
                .POST,
                "/t/globex/admin/v1/users",
                user: nil,
                headers: [operatorAuth, ("Content-Type", "application/json")],
                body: #"{"username": "bystander", "password": "h00k-pass"}"#
            )
            #expect(user.status == 201, "\(user.text)")
            // Within the hung attempts' 8 s: a slot was free for globex. Acme never held more than its 8.
            #expect(try await eventually(seconds: 6) { alive.taken.count == 1 })
            #expect(dead.received.count == 8, "\(dead.received.count)")
        }
    }
}
