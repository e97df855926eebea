import Foundation
import TestSupport
import Testing

@testable import Engine

/// When a user added through administration gets their first impulse: at their next delivery time by default,
/// at once when a welcome impulse is asked for (by the tenant, or by the request), on both stores, the decision
/// kept in the store across a scheduler restart.
@Suite("First delivery", .timeLimit(.minutes(3)))
struct FirstDeliveryTests {
    func utc(_ text: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: text)) }

    func scheduler(_ f: StoreFixture) -> Scheduler {
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        let gateway = PushGateway(
            store: f.store,
            ledger: ledger,
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: ScriptedTransport(),
            logger: StoreFixture.logger
        )
        return Scheduler(
            store: f.store,
            ledger: ledger,
            gateway: gateway,
            configuration: .init(spreadWindow: .zero),
            logger: StoreFixture.logger
        )
    }

    /// The local dates of a user's scheduled deliveries.
    func days(_ f: StoreFixture, _ user: User) async throws -> [String] {
        try await f.store.deliveredImpulses(tenant: user.tenant, user: user.id, after: nil, before: nil, limit: 100)
            .map(\.delivery).filter { $0.kind == .scheduled }.compactMap(\.localDate).sorted()
    }

    @Test(
        "Added at 15:00 with 08:00 delivery: the next morning by default, at once for a welcome; a restart keeps both",
        arguments: StoreKind.allCases
    )
    func startsAtNextDeliveryTime(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let added = try utc("2026-11-23T15:00:00Z")
        let administration = Administration(store: f.store, hashPassword: { password, _ in password }, now: { added })
        let utc8 = UserChanges(timeZone: "UTC", deliveryTime: try LocalTime(parsing: "08:00"))
        func add(_ name: String, _ firstDelivery: String?) async throws -> User {
            try await administration.createUser(
                tenant: f.acme,
                UserDraft(username: name, password: "a-password", settings: utc8, firstDelivery: firstDelivery),
                by: .commandLine
            )
        }
        let byDefault = try await add("by-default", nil)
        let welcomed = try await add("welcomed", "immediate")
        let told = try await add("told", "next-delivery-time")
        // The import takes the same override, for all of its new users.
        let rows = AsyncStream<Result<UserImportRow, UserImportRowError>> { continuation in
            continuation.yield(.success(UserImportRow(line: 2, username: "imported", password: "p", changes: utc8)))
            continuation.finish()
        }
        _ = try await administration.importUsers(tenant: f.acme, rows: rows, mode: .perRow, by: .commandLine)
        let welcomeRows = AsyncStream<Result<UserImportRow, UserImportRowError>> { continuation in
            continuation.yield(
                .success(UserImportRow(line: 2, username: "imported-welcome", password: "p", changes: utc8))
            )
            continuation.finish()
        }
        _ = try await administration.importUsers(
            tenant: f.acme,
            rows: welcomeRows,
            mode: .perRow,
            firstDelivery: .immediate,
            by: .commandLine
        )
        let imported = try #require(try await f.store.user(tenant: f.acme, username: "imported"))
        let importedWelcome = try #require(try await f.store.user(tenant: f.acme, username: "imported-welcome"))

        // The day they were added: only the welcomes. Today's 08:00 passed seven hours ago, within the
        // staleness limit, which alone would have delivered to every one of them.
        let first = scheduler(f)
        try await first.tick(now: added)
        try await first.tick(now: added.addingTimeInterval(1))
        #expect(try await days(f, welcomed) == ["2026-11-23"])
        #expect(try await days(f, importedWelcome) == ["2026-11-23"])
        for user in [byDefault, told, imported] { #expect(try await days(f, user).isEmpty, "\(user.username)") }

        // A scheduler started later (a restart, or one that was down when they were added) plans the same.
        let second = scheduler(f)
        try await second.tick(now: try utc("2026-11-23T20:00:00Z"))
        try await second.tick(now: try utc("2026-11-23T20:00:01Z"))
        for user in [byDefault, told, imported] { #expect(try await days(f, user).isEmpty, "\(user.username)") }

        // The next morning: everyone, once.
        try await second.tick(now: try utc("2026-11-24T08:00:01Z"))
        try await second.tick(now: try utc("2026-11-24T08:00:02Z"))
        for user in [byDefault, told, imported] {
            #expect(try await days(f, user) == ["2026-11-24"], "\(user.username)")
        }
        #expect(try await days(f, welcomed) == ["2026-11-23", "2026-11-24"])
    }

    @Test(
        "A tenant that chooses welcome impulses gets them for users added without an override",
        arguments: StoreKind.allCases
    )
    func tenantSetting(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let added = try utc("2026-11-23T15:00:00Z")
        let administration = Administration(store: f.store, hashPassword: { password, _ in password }, now: { added })
        #expect(try await administration.tenant(f.acme, by: .commandLine).firstDelivery == .nextDeliveryTime)
        let updated = try await administration.updateTenant(
            f.acme,
            TenantSettings(firstDelivery: "immediate"),
            by: .commandLine
        )
        #expect(updated.firstDelivery == .immediate)
        #expect(try await f.store.tenant(f.acme)?.firstDelivery == .immediate)
        await #expect(throws: EngineError.self) {
            try await administration.updateTenant(f.acme, TenantSettings(firstDelivery: "soon"), by: .commandLine)
        }
        let utc8 = UserChanges(timeZone: "UTC", deliveryTime: try LocalTime(parsing: "08:00"))
        let welcomed = try await administration.createUser(
            tenant: f.acme,
            UserDraft(username: "welcomed", password: "a-password", settings: utc8),
            by: .commandLine
        )
        let held = try await administration.createUser(
            tenant: f.acme,
            UserDraft(username: "held", password: "a-password", settings: utc8, firstDelivery: "next-delivery-time"),
            by: .commandLine
        )
        await #expect(throws: EngineError.self) {
            try await administration.createUser(
                tenant: f.acme,
                UserDraft(username: "odd", password: "a-password", firstDelivery: "later"),
                by: .commandLine
            )
        }
        #expect(try await f.store.user(tenant: f.acme, username: "odd") == nil)
        let scheduler = scheduler(f)
        try await scheduler.tick(now: added)
        try await scheduler.tick(now: added.addingTimeInterval(1))
        #expect(try await days(f, welcomed) == ["2026-11-23"])
        #expect(try await days(f, held).isEmpty)
    }
}
