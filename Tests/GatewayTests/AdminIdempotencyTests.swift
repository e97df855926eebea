import Engine
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// A retried creating request with the same `Idempotency-Key` answers what the first one answered, once.
@Suite("Admin API: Idempotency-Key", .timeLimit(.minutes(2)))
struct AdminIdempotencyTests {
    @Test(
        "A retried creating POST with the same key answers the first result and writes nothing again",
        arguments: TestDatabase.allCases
    )
    func retries(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            func post(_ path: String, _ body: String, key: String) async throws -> TestBroker.Reply {
                try await broker.send(
                    .POST,
                    "/t/acme/admin/v1" + path,
                    user: "root",
                    headers: [("Content-Type", "application/json"), ("Idempotency-Key", key)],
                    body: body
                )
            }
            let body = #"{"username": "erin", "password": "3rin-pass"}"#
            let first = try await post("/users", body, key: "create-erin-1")
            #expect(first.status == 201 && first.headers["idempotent-replayed"].isEmpty)
            let again = try await post("/users", body, key: "create-erin-1")
            #expect(again.status == 201 && again.body == first.body, "\(again.text)")
            #expect(again.headers["idempotent-replayed"].first == "true")
            #expect(again.headers["location"].first == first.headers["location"].first)
            // Without the key, the same request is a conflict: the user exists.
            #expect(
                try await broker.send(
                    .POST,
                    "/t/acme/admin/v1/users",
                    user: "root",
                    headers: [("Content-Type", "application/json")],
                    body: body
                ).status == 409
            )
            // The same key for another request is refused.
            let other = try await post(
                "/users",
                #"{"username": "frank", "password": "fr4nk-pass"}"#,
                key: "create-erin-1"
            )
            #expect(
                other.status == 422
                    && other.json["type"] as? String == "urn:impulse-broker:problem:idempotency-key-reused"
            )
            // A delivery posted twice with one key is one delivery, one push.
            let deliver = #"{"impulse": "acme-2"}"#
            #expect(try await post("/users/bob/deliveries", deliver, key: "d-1").status == 201)
            #expect(try await post("/users/bob/deliveries", deliver, key: "d-1").status == 201)
            let ledger = try await broker.send(.GET, "/t/acme/admin/v1/users/bob/deliveries", user: "root")
            #expect((ledger.json["items"] as? [[String: Any]])?.count == 1, "\(ledger.text)")
            // A failed request keeps no answer: its retry runs again.
            #expect(try await post("/users/bob/deliveries", #"{"impulse": "none-such"}"#, key: "d-2").status == 404)
            #expect(try await post("/users/bob/deliveries", deliver, key: "d-2").status == 201)
            let trail = try await broker.send(.GET, "/t/acme/admin/v1/audit", user: "root")
            let actions = (trail.json["items"] as? [[String: Any]])?.compactMap { $0["action"] as? String }
            #expect(actions == ["delivery.create", "delivery.create", "user.create"], "\(actions ?? [])")
            // Keys are the caller's own: the operator's same key is another key.
            let operatorCreate = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users",
                user: nil,
                headers: AdminAPITests.bearer + [
                    ("Content-Type", "application/json"), ("Idempotency-Key", "create-erin-1"),
                ],
                body: #"{"username": "gina", "password": "g1na-pass"}"#
            )
            #expect(operatorCreate.status == 201)
        }
    }

    @Test("An account deleted and made again under its name does not replay the first account's answers")
    func recreatedAccount() async throws {
        try await TestBroker.run { broker in
            func send(
                _ method: HTTPMethod,
                _ path: String,
                as user: String,
                _ body: String? = nil,
                key: String? = nil
            )
                async throws -> TestBroker.Reply
            {
                var headers = [("Content-Type", "application/json")]
                if let key { headers.append(("Idempotency-Key", key)) }
                return try await broker.send(
                    method,
                    "/t/acme/admin/v1" + path,
                    user: user,
                    password: user == "boss" ? "b0ss-pass" : nil,
                    headers: headers,
                    body: body
                )
            }
            let boss = #"{"username": "boss", "password": "b0ss-pass", "admin": true}"#
            #expect(try await send(.POST, "/users", as: "root", boss).status == 201)
            let hank = #"{"username": "hank", "password": "h4nk-pass"}"#
            #expect(try await send(.POST, "/users", as: "boss", hank, key: "k-1").status == 201)
            #expect(try await send(.DELETE, "/users/boss", as: "root").status == 200)
            #expect(try await send(.POST, "/users", as: "root", boss).status == 201)
            // The new boss's request runs: hank exists (409), nothing is replayed.
            let again = try await send(.POST, "/users", as: "boss", hank, key: "k-1")
            #expect(again.status == 409 && again.headers["idempotent-replayed"].isEmpty, "\(again.text)")
        }
    }
}
