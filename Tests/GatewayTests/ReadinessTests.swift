import Foundation
import Gateway
import TestSupport
import Testing

/// `GET /health` as a load balancer and Kubernetes read it: ready while the store takes a write, not ready (503)
/// while it cannot; `/health/live` answers either way. On the public and the admin listener alike.
@Suite("Readiness and refusals", .timeLimit(.minutes(2)))
struct ReadinessTests {
    @Test("A store that cannot take a write makes the node unready on both listeners, not dead; it recovers")
    func storeUnreachable() async throws {
        try await TestBroker.run(adminToken: "t0ken", busyTimeout: .seconds(1)) { broker in
            #expect(try await broker.send(.GET, "/health").status == 200)
            #expect(try await broker.admin("/health").status == 200)  // no token needed for the probes
            let lock = try await AdmissionTests.lock(broker)
            var health = try await broker.send(.GET, "/health")
            let unready = try await eventually(seconds: 10) {
                health = try await broker.send(.GET, "/health")
                return health.status == 503
            }
            #expect(unready, "\(health.status) \(health.text)")
            #expect(health.headers["content-type"].first == "application/problem+json")
            #expect(health.headers["retry-after"].first == "5")
            #expect(health.json["type"] as? String == "urn:impulse-broker:problem:not-ready")
            #expect((health.json["detail"] as? String)?.contains("store") == true, "\(health.text)")
            #expect(try await broker.admin("/health").status == 503)
            #expect(try await broker.send(.GET, "/health/live").status == 200)
            #expect(try await broker.admin("/health/live").status == 200)
            try await lock.release()
            #expect(try await eventually(seconds: 10) { try await broker.send(.GET, "/health").status == 200 })
        }
    }

    @Test("Refused pushes show in /inspect by kind, with their count, at once")
    func refusalsInInspect() async throws {
        try await TestBroker.run(adminToken: "t0ken") { broker in
            let token = String(repeating: "7c", count: 32)
            _ = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "p"}"#
            )
            let simulator = try #require(broker.application.simulator)
            simulator.setToken(token, .unregistered(since: Date().addingTimeInterval(3600)))
            _ = try await broker.sendPush("command=send&impulse=acme-5&target=alice")
            var refusals: [[String: Any]] = []
            let shown = try await eventually {
                let view = try await broker.admin("/inspect", token: "t0ken").json
                let tenants = view["tenants"] as? [[String: Any]] ?? []
                refusals = tenants.first { $0["tenant"] as? String == "acme" }?["refusals"] as? [[String: Any]] ?? []
                return !refusals.isEmpty
            }
            #expect(shown)
            #expect(refusals.first?["kind"] as? String == "410 Unregistered", "\(refusals)")
            #expect(refusals.first?["count"] as? Int == 1)
            #expect(refusals.first?["lastAt"] is String)
        }
    }
}
