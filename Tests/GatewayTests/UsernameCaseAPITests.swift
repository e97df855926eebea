import Foundation
import GRDB
import Logging
import TestSupport
import Testing

@testable import Engine

/// Usernames without regard to case through the real interfaces: the app's Basic authentication, the admin
/// API's conflict, and `broker migrate` reporting names that already differed only in case.
@Suite("Usernames without regard to case, through the server and the CLI", .timeLimit(.minutes(2)))
struct UsernameCaseAPITests {
    @Test("The app signs in with the name in any case; the admin API refuses a name that differs only in case")
    func signInAnyCase() async throws {
        try await TestBroker.run { broker in
            let me = try await broker.send(.GET, "/v1/me", user: "ALICE", password: Fixture.alicePassword)
            #expect(me.status == 200 && me.json["username"] as? String == "alice", "\(me.text)")
            #expect(try await broker.send(.GET, "/CurrentImpulse", user: "Alice", password: "wrong").status == 401)
            let taken = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users",
                user: nil,
                headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
                body: #"{"username": "Alice", "password": "another-one"}"#
            )
            #expect(taken.status == 409, "\(taken.text)")
            // A user imported under another case is the same user, updated, not a second one.
            let imported = try await broker.send(
                .POST,
                "/t/acme/admin/v1/user-imports",
                user: nil,
                headers: AdminAPITests.bearer + [("Content-Type", "text/csv")],
                body: "username,language\nALICE,FR\n"
            )
            #expect(imported.json["updated"] as? Int == 1 && imported.json["created"] as? Int == 0, "\(imported.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "alice")?.language == "FR")
        }
    }

    @Test("broker migrate lists the names that already differ only in case, before and after it applies the rule")
    func migrateReportsTwins() async throws {
        let data = TestBroker.temporaryDirectory()
        try SQLiteStore.migrator.migrate(try DatabaseQueue(path: data + "/broker.sqlite"), upTo: "v17-first-delivery")
        let old = try await SQLiteStore(
            configuration: .init(path: data + "/broker.sqlite", migrations: .leave),
            logger: Logger(label: "username-case-api-tests")
        )
        let acme = try TenantID("acme")
        // The tenant as that release wrote it: this release's insert names columns added later.
        try await DatabaseQueue(path: data + "/broker.sqlite").write { db in
            try db.execute(
                sql: """
                    INSERT INTO tenants (id, name, default_language, default_time_zone, default_delivery_minute,
                        max_pushes_per_day, apns_topic, created_at) VALUES ('acme', 'Acme', 'EN', 'UTC', 480, 1, 't', 0)
                    """
            )
        }
        for name in ["anna", "ANNA", "bob"] {
            _ = try await old.createUser(try NewUser(tenant: acme, username: name, passwordHash: "x"))
        }
        let check = try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data)
        #expect(check.status == 2, "\(check.error)")
        #expect(
            check.output.contains("differ only in case") && check.output.contains("  acme: anna, ANNA\n"),
            "\(check.output)"
        )
        let applied = try await BrokerProcess.run(["migrate"], dataDirectory: data)
        #expect(applied.status == 0 && applied.output.contains("  acme: anna, ANNA\n"), "\(applied.output)")
        let clean = try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data)
        #expect(clean.status == 0 && clean.output.contains("acme: anna, ANNA"), "\(clean.output)")
    }
}
