import Engine
import Foundation
import Gateway
import TestSupport
import Testing

/// `broker store copy`: an embedded deployment moved into PostgreSQL by the real command.
@Suite("Moving from SQLite to PostgreSQL", .timeLimit(.minutes(2)))
struct StoreCopyTests {
    @Test("store copy moves every table with its ids, verifies the counts, and refuses a database that holds data")
    func copy() async throws {
        let directory = TestBroker.temporaryDirectory()
        let path = directory + "/broker.sqlite"
        let sqlite = try await SQLiteStore(configuration: .init(path: path), logger: TestBroker.logger)
        try await Fixture.seed(sqlite)
        let alice = try #require(try await sqlite.user(tenant: Fixture.acme, username: "alice"))
        let bob = try #require(try await sqlite.user(tenant: Fixture.acme, username: "bob"))
        _ = try await sqlite.registerDevice(
            try Device(
                tenant: Fixture.acme,
                topic: "com.acme.impulse",
                token: DeviceToken(String(repeating: "ab", count: 32)),
                owner: alice.id,
                name: "phone",
                environment: .sandbox,
                registeredAt: Date(timeIntervalSince1970: 1_700_000_000)
            )
        )
        _ = try await sqlite.createReminder(
            tenant: Fixture.acme,
            user: alice.id,
            impulse: try ImpulseID("acme-3"),
            at: Date(timeIntervalSince1970: 1_900_000_000),
            maximumPending: 5
        )
        let delivered = try await sqlite.deliveredImpulses(
            tenant: Fixture.acme,
            user: alice.id,
            after: nil,
            before: nil,
            limit: 100
        )
        try await sqlite.applyMarks([
            DeliveryMark(tenant: Fixture.acme, delivery: delivered[0].delivery.id, kind: .read, at: Date())
        ])
        try await sqlite.setPreferences(
            tenant: Fixture.acme,
            user: bob.id,
            language: "DE",
            preferences: DeliveryPreferences(timeZone: "Asia/Tokyo", deliveryTime: try LocalTime(parsing: "07:15"))
        )

        // An operator account, a suspended tenant and their audit trail move too.
        let administration = Administration(store: sqlite, hashPassword: { password, _ in "hash of " + password })
        try await administration.addOperator(name: "ops", password: "0ps", by: .commandLine)
        _ = try await administration.updateTenant(Fixture.globex, TenantSettings(suspended: true), by: .commandLine)

        let url = try await PostgresTestDatabases.make() + "?sslmode=disable"
        let copied = try await BrokerProcess.run(["store", "copy", "--from", path, "--to", url], dataDirectory: nil)
        #expect(copied.status == 0, "\(copied.error)")
        #expect(copied.output.contains("users: 5 copied, 5 in the target"), "\(copied.output)")
        #expect(copied.output.contains("the counts match"))

        let postgres = try await PostgresStore(
            configuration: try PostgresStoreConfiguration(url: url),
            logger: TestBroker.logger
        )
        #expect(try await postgres.tenants() == (try await sqlite.tenants()))
        #expect(try await postgres.tenants().map(\.suspended) == [false, true])
        #expect(try await postgres.operatorAccounts() == (try await sqlite.operatorAccounts()))
        let trail = try await sqlite.auditEntries(tenant: nil, before: nil, limit: 10)
        let copiedTrail = try await postgres.auditEntries(tenant: nil, before: nil, limit: 10)
        #expect(trail.count == 2 && copiedTrail == trail)
        for tenant in [Fixture.acme, Fixture.globex] {
            #expect(try await postgres.users(tenant: tenant) == (try await sqlite.users(tenant: tenant)))
            #expect(try await postgres.impulses(tenant: tenant) == (try await sqlite.impulses(tenant: tenant)))
            for user in try await sqlite.users(tenant: tenant) {
                #expect(
                    try await postgres.deliveredImpulses(
                        tenant: tenant,
                        user: user.id,
                        after: nil,
                        before: nil,
                        limit: 100
                    )
                        == (try await sqlite.deliveredImpulses(
                            tenant: tenant,
                            user: user.id,
                            after: nil,
                            before: nil,
                            limit: 100
                        ))
                )
                #expect(
                    try await postgres.devices(tenant: tenant, owner: user.id)
                        == (try await sqlite.devices(tenant: tenant, owner: user.id))
                )
                #expect(
                    try await postgres.scheduleEntry(tenant: tenant, user: user.id)
                        == (try await sqlite.scheduleEntry(tenant: tenant, user: user.id))
                )
                #expect(
                    try await postgres.reminders(tenant: tenant, user: user.id)
                        == (try await sqlite.reminders(tenant: tenant, user: user.id))
                )
            }
        }
        #expect(try await postgres.unreadCount(tenant: Fixture.acme, user: alice.id) == Fixture.aliceDeliveries - 1)
        // The ids go on after the copied ones.
        let dave = try await postgres.createUser(try NewUser(tenant: Fixture.acme, username: "dave", passwordHash: "x"))
        #expect(dave.id.rawValue > (try await sqlite.users(tenant: Fixture.globex)).map(\.id.rawValue).max() ?? 0)

        // Again, into a database that now holds data: refused, and nothing changes.
        let again = try await BrokerProcess.run(["store", "copy", "--from", path, "--to", url], dataDirectory: nil)
        #expect(again.status != 0)
        #expect(again.error.contains("not empty"), "\(again.error)")
        #expect(try await postgres.user(tenant: Fixture.acme, username: "dave") != nil)
        // Told to replace it: the target is the SQLite file's copy again.
        let replaced = try await BrokerProcess.run(
            ["store", "copy", "--from", path, "--to", url, "--replace"],
            dataDirectory: nil
        )
        #expect(replaced.status == 0, "\(replaced.error)")
        #expect(try await postgres.user(tenant: Fixture.acme, username: "dave") == nil)
        #expect(try await postgres.users(tenant: Fixture.acme) == (try await sqlite.users(tenant: Fixture.acme)))
        // A file that is not there, a target that is not PostgreSQL: clear errors.
        let missing = try await BrokerProcess.run(
            ["store", "copy", "--from", "/nonexistent", "--to", url],
            dataDirectory: nil
        )
        #expect(missing.status != 0 && missing.error.contains("no SQLite file"))
        let wrong = try await BrokerProcess.run(
            ["store", "copy", "--from", path, "--to", "/tmp/x.sqlite"],
            dataDirectory: nil
        )
        #expect(wrong.status != 0 && wrong.error.contains("postgres://"), "\(wrong.error)")
        await postgres.close()
    }
}
