import Foundation
import GRDB
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import Engine

/// Usernames are unique without regard to case and find their user in any case; names that differed only in
/// case before the rule are kept apart by the migration, reported, and answer only to their exact spelling.
@Suite("Usernames without regard to case", .timeLimit(.minutes(2)))
struct UsernameCaseTests {
    static let logger = Logger(label: "username-case-tests")

    @Test("The match key folds ASCII letters only; the pick prefers the exact spelling, else the only candidate")
    func rule() throws {
        #expect(UsernameMatch.key("Anna.Berg@ACME.example") == "anna.berg@acme.example")
        #expect(UsernameMatch.key("ZOË") == "zoË")
        let anna = User(
            id: UserID(1),
            tenant: try TenantID("acme"),
            username: "anna",
            passwordHash: "x",
            language: nil,
            lifeAreas: .neutral,
            enabled: true,
            preferences: .init(),
            createdAt: Date()
        )
        var twin = anna
        twin.id = UserID(2)
        twin.username = "ANNA"
        #expect(UsernameMatch.pick([anna], typed: "Anna") == anna)
        #expect(UsernameMatch.pick([twin, anna], typed: "ANNA") == twin)
        #expect(UsernameMatch.pick([anna, twin], typed: "Anna") == nil)
        #expect(UsernameMatch.pick([], typed: "anna") == nil)
    }

    @Test(
        "A name is found in any case and taken in no other case, through administration and the store",
        arguments: StoreKind.allCases
    )
    func unique(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let administration = Administration(store: f.store, hashPassword: { password, _ in password })
        let added = try await administration.createUser(
            tenant: f.acme,
            UserDraft(username: "Anna.Berg@Acme.example", password: "a-password"),
            by: .commandLine
        )
        #expect(try await f.store.user(tenant: f.acme, username: "anna.berg@acme.example")?.id == added.id)
        #expect(try await f.store.user(tenant: f.acme, username: "ANNA.BERG@ACME.EXAMPLE")?.username == added.username)
        #expect(try await f.store.user(tenant: f.globex, username: "anna.berg@acme.example") == nil)
        let taken = await #expect(throws: EngineError.self) {
            try await administration.createUser(
                tenant: f.acme,
                UserDraft(username: "anna.berg@acme.example", password: "a-password"),
                by: .commandLine
            )
        }
        #expect(taken?.code == .conflict)
        // Below administration's check (two nodes adding at once), the store's unique index refuses it.
        let raced = await #expect(throws: EngineError.self) {
            try await f.store.createUser(
                try NewUser(tenant: f.acme, username: "ANNA.berg@acme.example", passwordHash: "x")
            )
        }
        #expect(raced?.code == .conflict)
        // Another tenant may have the name.
        _ = try await f.store.createUser(
            try NewUser(tenant: f.globex, username: "anna.berg@acme.example", passwordHash: "x")
        )
        // Non-ASCII letters do not fold: two names.
        _ = try await f.store.createUser(try NewUser(tenant: f.acme, username: "zoë", passwordHash: "x"))
        _ = try await f.store.createUser(try NewUser(tenant: f.acme, username: "ZOË", passwordHash: "x"))
        #expect(try await f.store.caseTwins().isEmpty)
    }

    @Test(
        "Names that differed only in case before the migration are kept apart and reported",
        arguments: StoreKind.allCases
    )
    func twinsBeforeTheRule(_ kind: StoreKind) async throws {
        let store: any BrokerStore
        // The tenant as that release wrote it: this release's insert names columns added later.
        let tenantRow = """
            INSERT INTO tenants (id, name, default_language, default_time_zone, default_delivery_minute,
                max_pushes_per_day, apns_topic, created_at) VALUES ('acme', 'Acme', 'EN', 'UTC', 480, 1, 't', 0)
            """
        switch kind {
        case .sqlite:
            let path = try MigrationTests.sqliteFile(upTo: "v17-first-delivery")
            let old = try await SQLiteStore(configuration: .init(path: path, migrations: .leave), logger: Self.logger)
            try await old.write { db in try db.execute(sql: tenantRow) }
            store = old
        case .postgres:
            var configuration = try PostgresStoreConfiguration(url: try await PostgresTestDatabases.make())
            configuration.migrations = .leave
            let old = try await PostgresStore(configuration: configuration, logger: Self.logger)
            try await old.migrate(upTo: 15)
            try await old.write { connection in
                try await connection.query(PostgresQuery(unsafeSQL: tenantRow), logger: Self.logger)
            }
            store = old
        }
        let acme = try TenantID("acme")
        var made: [String: UserID] = [:]
        for name in ["anna", "bob", "ANNA", "Anna", "carl"] {
            made[name] = try await store.createUser(try NewUser(tenant: acme, username: name, passwordHash: "x")).id
        }
        #expect(try await store.caseTwins() == [CaseTwins(tenant: acme, usernames: ["anna", "ANNA", "Anna"])])
        _ = try await store.applyMigrations()
        #expect(try await store.pendingMigrations().isEmpty)
        #expect(try await store.caseTwins() == [CaseTwins(tenant: acme, usernames: ["anna", "ANNA", "Anna"])])
        // Each twin answers to its exact spelling only; a spelling none of them has is none of them.
        for name in ["anna", "ANNA", "Anna"] {
            #expect(try await store.user(tenant: acme, username: name)?.id == made[name], "\(name)")
        }
        #expect(try await store.user(tenant: acme, username: "aNNa") == nil)
        // Everyone else signs in in any case, and no new twin comes in.
        #expect(try await store.user(tenant: acme, username: "BOB")?.id == made["bob"])
        await #expect(throws: EngineError.self) {
            try await store.createUser(try NewUser(tenant: acme, username: "aNNa", passwordHash: "x"))
        }
        await #expect(throws: EngineError.self) {
            try await store.createUser(try NewUser(tenant: acme, username: "Carl", passwordHash: "x"))
        }
        // Deleting all but one lets the rest sign in in any case.
        for name in ["ANNA", "Anna"] {
            let user = try #require(try await store.user(tenant: acme, username: name))
            _ = try await store.deleteUser(
                tenant: acme,
                user: user.id,
                audit: AuditEntry(.commandLine, "user.delete", tenant: acme, target: name)
            )
        }
        #expect(try await store.user(tenant: acme, username: "aNNa")?.id == made["anna"])
        #expect(try await store.caseTwins().isEmpty)
    }
}
