import Engine
import Foundation
import Gateway
import TestSupport
import Testing

@Suite("Reminders API", .timeLimit(.minutes(2)))
struct ReminderAPITests {
    @Test(
        "POST on an impulse sets a reminder; the scheduler pushes the impulse once more at that time",
        arguments: TestDatabase.allCases
    )
    func reminderIsPushed(_ database: TestDatabase) async throws {
        try await TestBroker.run(
            database: database,
            scheduler: SchedulerConfiguration(pollInterval: .milliseconds(100))
        ) { broker in
            let token = String(repeating: "5e", count: 32)
            let registered = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "iPhone"}"#
            )
            #expect(registered.status == 200 || registered.status == 204)
            let created = try await broker.remind("acme-3", in: 1)
            #expect(created.status == 201)
            #expect(created.json["workingID"] as? String == "acme-3")
            let id = try #require(created.json["id"] as? Int)
            #expect(created.headers.first(name: "Location") == "/v1/reminders/\(id)")
            let simulator = try #require(broker.application.simulator)
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice"))
            @Sendable func reminded() async throws -> [DeliveredImpulse] {
                try await broker.store.deliveredImpulses(
                    tenant: Fixture.acme,
                    user: alice.id,
                    after: nil,
                    before: nil,
                    limit: 100
                ).filter { $0.delivery.kind == .reminder }
            }
            // Waits for the reminder's own delivery. Alice's scheduled impulse today is acme-3 too: when her device
            // is registered before the day's dispatch reaches her (under CI's load), that push came first, and
            // waiting on the simulator alone ended the wait before the reminder was due.
            #expect(try await eventually(seconds: 30) { try await reminded().contains { $0.delivery.pushedAt != nil } })
            #expect(try await reminded().map(\.impulse.id.rawValue) == ["acme-3"])
            #expect(simulator.accepted.contains { $0.token == token && $0.payload.contains("acme-3") })
            #expect(try await broker.send(.GET, "/v1/reminders").json["reminders"] as? [Any] != nil)
            #expect(try await broker.store.reminders(tenant: Fixture.acme, user: alice.id).isEmpty)
        }
    }

    @Test(
        "Bad reminder requests get problems and store nothing; reminders list and delete per user",
        arguments: TestDatabase.allCases
    )
    func validation(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            func post(_ path: String, _ body: String) async throws -> TestBroker.Reply {
                try await broker.send(.POST, path, headers: [("Content-Type", "application/json")], body: body)
            }
            let past = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-3600))
            let far = ISO8601DateFormatter().string(from: Date().addingTimeInterval(90 * 86_400))
            let soon = ISO8601DateFormatter().string(from: Date().addingTimeInterval(3600))
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "\#(past)"}"#).status == 422)
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "\#(far)"}"#).status == 422)
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "tomorrow"}"#).status == 422)
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "\#(soon)", "time": "18:00"}"#).status == 422)
            #expect(try await post("/v1/impulses/acme-1", #"{"time": "25:00"}"#).status == 422)
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "#).status == 400)
            let notMine = try await post("/v1/impulses/secret-1", #"{"remindAt": "\#(soon)"}"#)
            #expect(notMine.status == 404)
            #expect(notMine.headers.first(name: "Content-Type") == "application/problem+json")
            let byTime = try await post("/v1/impulses/acme-2", #"{"time": "18:30"}"#)
            #expect(byTime.status == 201)
            let list = try await broker.send(.GET, "/v1/reminders")
            let reminders = try #require(list.json["reminders"] as? [[String: Any]])
            #expect(reminders.count == 1)
            // Bob cannot see or delete alice's reminder.
            #expect(
                (try await broker.send(.GET, "/v1/reminders", user: "bob").json["reminders"] as? [Any])?.isEmpty == true
            )
            let id = try #require(reminders.first?["id"] as? Int)
            #expect(try await broker.send(.DELETE, "/v1/reminders/\(id)", user: "bob").status == 404)
            #expect(try await broker.send(.DELETE, "/v1/reminders/\(id)").status == 204)
            #expect(try await broker.send(.DELETE, "/v1/reminders/\(id)").status == 404)
            for _ in 0..<20 {
                #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "\#(soon)"}"#).status == 201)
            }
            #expect(try await post("/v1/impulses/acme-1", #"{"remindAt": "\#(soon)"}"#).status == 409)
        }
    }
}
