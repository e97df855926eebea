import Foundation
import GRDB
import Gateway
import Testing

/// The REST API over a store that stalls: a real SQLite file whose write lock another connection holds, with the
/// broker's busy wait far longer than the request deadline (as a frozen file system would make it wait).
@Suite("A stalled store", .timeLimit(.minutes(2)))
struct StoreFailureTests {
    @Test("A write that cannot finish in time is answered 503 with Retry-After, and works once the store does")
    func stalledWrite() async throws {
        try await TestBroker.run(requestDeadline: .seconds(1), busyTimeout: .seconds(60)) { broker in
            #expect(try await broker.send(.GET, "/v1/me").status == 200)  // the login is cached now
            var unsafe = Configuration()
            unsafe.allowsUnsafeTransactions = true  // the transaction stays open between the two accesses
            let lock = try DatabaseQueue(path: broker.directory + "/broker.sqlite", configuration: unsafe)
            try await lock.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
            let started = ContinuousClock.now
            let stalled = try await broker.send(
                .PUT,
                "/v1/me/preferences",
                headers: [("Content-Type", "application/json")],
                body: #"{"deliveryTime": "07:15"}"#,
                timeout: .seconds(15)
            )
            #expect(stalled.status == 503, "\(stalled.text)")
            #expect(stalled.headers["Retry-After"].first.flatMap(Int.init) ?? 0 >= 1)
            #expect(stalled.headers["Content-Type"].first == "application/problem+json")
            #expect(stalled.json["type"] as? String == "urn:impulse-broker:problem:storage-unavailable")
            #expect(started.duration(to: .now) < .seconds(10))  // the deadline, not the 60 s busy wait
            // Reads do not need the write lock: they still answer.
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
            try await lock.writeWithoutTransaction { try $0.execute(sql: "ROLLBACK") }
            let retried = try await broker.send(
                .PUT,
                "/v1/me/preferences",
                headers: [("Content-Type", "application/json")],
                body: #"{"deliveryTime": "07:20"}"#
            )
            #expect(retried.status == 200, "\(retried.text)")
            let me = try await broker.send(.GET, "/v1/me")
            let preferences = me.json["preferences"] as? [String: Any]
            #expect(preferences?["deliveryTime"] as? String == "07:20", "\(me.text)")
        }
    }
}
