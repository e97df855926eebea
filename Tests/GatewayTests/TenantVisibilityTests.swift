import Engine
import Foundation
import Gateway
import Testing

/// A tenant is there as soon as it is created: on the node that wrote it at once, on other nodes and processes
/// when the change feed brings the creation (a change entry, announced by PostgreSQL's `NOTIFY`).
@Suite("New tenants are visible at once")
struct TenantVisibilityTests {
    @Test("A tenant asked for before it existed answers at once after its creation", arguments: TestDatabase.allCases)
    func createdAfterAMiss(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let before = try await broker.send(.GET, "/t/newco/v1/me", user: nil)
            #expect(before.status == 404 && before.text.contains("unknown-tenant"), "\(before.text)")
            let since = try await broker.store.latestChangeSequence()
            let created = try await broker.send(
                .POST,
                "/admin/v1/tenants",
                user: nil,
                headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
                body: #"{"id": "newco", "name": "NewCo", "apnsTopic": "com.newco.app"}"#
            )
            #expect(created.status == 201, "\(created.text)")
            // This node: known at once (asked without credentials: 401, not 404).
            let after = try await broker.send(.GET, "/t/newco/v1/me", user: nil)
            #expect(after.status == 401, "\(after.status) \(after.text)")
            // Other nodes and processes: the creation is in the change feed.
            let changes = try await broker.store.changes(after: since, limit: 100)
            #expect(changes.contains { $0.tenant.rawValue == "newco" && $0.subject == .catalog }, "\(changes)")
        }
    }
}
