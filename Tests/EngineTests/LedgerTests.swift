import Foundation
import GRDB
import Synchronization
import TestSupport
import Testing

@testable import Engine

@Suite("Delivery ledger")
struct LedgerTests {
    func assignMany(_ f: StoreFixture, _ ledger: DeliveryLedger, count: Int, user: User) async throws {
        for index in 0..<count {
            _ = try await ledger.assign([
                NewDelivery(
                    tenant: user.tenant,
                    user: user.id,
                    impulse: try ImpulseID(index % 2 == 0 ? "one" : "two"),
                    kind: .manual,
                    assignedAt: Date(timeIntervalSince1970: Double(1000 + index))
                )
            ])
        }
    }

    @Test("Pages from memory equal pages from the store, across the hot-item boundary", arguments: StoreKind.allCases)
    func pagesMatchStore(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(
            store: f.store,
            catalog: CatalogCache(store: f.store),
            configuration: .init(shardCount: 2, hotItemsPerUser: 4)
        )
        try await assignMany(f, ledger, count: 9, user: f.a)
        for (after, before, limit) in [
            (nil, nil, 3), (nil, nil, 9), (Int64?(5), nil, 10), (nil, Int64?(6), 2), (Int64?(2), Int64?(8), 10),
        ] {
            let page = try await ledger.page(
                tenant: f.acme,
                user: f.a.id,
                after: after.map(DeliveryID.init),
                before: before.map(DeliveryID.init),
                limit: limit
            )
            let stored = try await f.store.deliveredImpulses(
                tenant: f.acme,
                user: f.a.id,
                after: after.map(DeliveryID.init),
                before: before.map(DeliveryID.init),
                limit: limit
            )
            #expect(
                page.items.map(\.delivery.id) == stored.map(\.delivery.id),
                "after \(String(describing: after)) before \(String(describing: before)) limit \(limit)"
            )
        }
        // A cached user sees a new assignment at once.
        _ = try await ledger.page(tenant: f.acme, user: f.a.id, limit: 1)
        try await assignMany(f, ledger, count: 1, user: f.a)
        #expect(
            try await ledger.page(tenant: f.acme, user: f.a.id, limit: 1).items.first?.delivery.assignedAt
                == Date(timeIntervalSince1970: 1000)
        )
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.a.id) == 10)
    }

    @Test("Concurrent read marks from many requests keep memory and store in agreement", arguments: StoreKind.allCases)
    func concurrentReads(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(
            store: f.store,
            catalog: CatalogCache(store: f.store),
            configuration: .init(shardCount: 4, hotItemsPerUser: 3)
        )
        try await assignMany(f, ledger, count: 6, user: f.a)
        try await assignMany(f, ledger, count: 6, user: f.b)
        let items = try await f.store.deliveredImpulses(
            tenant: f.acme,
            user: f.a.id,
            after: nil,
            before: nil,
            limit: 100
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                for user in [f.a, f.b] {
                    group.addTask {
                        _ = try await ledger.item(
                            tenant: f.acme,
                            user: user.id,
                            impulse: try ImpulseID("one"),
                            mark: .read
                        )
                    }
                    group.addTask {
                        _ = try await ledger.page(tenant: f.acme, user: user.id, limit: 5, markFetchedAt: Date())
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(items.count == 6)
        for user in [f.a, f.b] {
            let inMemory = try await ledger.unreadCount(tenant: f.acme, user: user.id)
            let stored = try await f.store.unreadCount(tenant: f.acme, user: user.id)
            // The newest "one" delivery was read; the other five remain unread.
            #expect(inMemory == 5)
            #expect(stored == 5)
        }
    }

    @Test(
        "Push outcomes recorded without waiting reach the store by the time the ledger is flushed",
        arguments: StoreKind.allCases
    )
    func outcomesWithoutWaiting(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let recorded = try await f.store.recordDeliveries(
            try (1...300).map { (n: Int) in
                NewDelivery(
                    tenant: f.acme,
                    user: f.a.id,
                    impulse: try ImpulseID(n % 2 == 0 ? "one" : "two"),
                    kind: .manual,
                    assignedAt: Date(),
                    awaitsPush: true
                )
            }
        )
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        // Many small batches, as the push gateway's workers record them, none waiting for the disk.
        for chunk in stride(from: 0, to: recorded.count, by: 7).map({
            Array(recorded[$0..<min(recorded.count, $0 + 7)])
        }) {
            try await ledger.record(
                chunk.map {
                    PushSettlement(
                        tenant: f.acme,
                        user: f.a.id,
                        delivery: $0.id,
                        apnsID: $0.id.rawValue % 2 == 0 ? "id-\($0.id.rawValue)" : nil
                    )
                }
            )
        }
        await ledger.flushOutcomes()
        #expect(try await f.store.unsettledDeliveries(assignedAfter: .distantPast, after: nil, limit: 1000).isEmpty)
        let page = try await f.store.deliveredImpulses(
            tenant: f.acme,
            user: f.a.id,
            after: nil,
            before: nil,
            limit: 1000
        )
        #expect(page.filter { $0.delivery.pushedAt != nil }.count == recorded.filter { $0.id.rawValue % 2 == 0 }.count)
    }

    @Test("Memory holds at most the configured number of users per shard", arguments: StoreKind.allCases)
    func bounded(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(
            store: f.store,
            catalog: CatalogCache(store: f.store),
            configuration: .init(shardCount: 1, hotItemsPerUser: 2, cachedUsersPerShard: 10)
        )
        var users: [User] = []
        for index in 0..<40 {
            users.append(
                try await f.store.createUser(try NewUser(tenant: f.acme, username: "u\(index)", passwordHash: "x"))
            )
        }
        for user in users { _ = try await ledger.unreadCount(tenant: f.acme, user: user.id) }
        #expect(await ledger.cachedUserCount() <= 10)
    }

    @Test(
        "A change from another process drops the user's hot state, so the next read sees it",
        arguments: StoreKind.allCases
    )
    func invalidation(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.a.id) == 0)
        let other = try await StoreFixture.open(kind, f.location)
        let recorded = try await other.recordDeliveries([
            NewDelivery(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"), kind: .manual, assignedAt: Date())
        ])
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.a.id) == 0)  // still the cached state
        let change = try #require(try await f.store.changes(after: 0, limit: 100).last)
        #expect(change.subject == .ledger(f.a.id))
        await ledger.apply(change)
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.a.id) == 1)
        #expect(
            try await ledger.page(tenant: f.acme, user: f.a.id, limit: 5).items.map(\.delivery.id) == recorded.map(\.id)
        )
    }

    @Test(
        "A user asked for under another tenant gets nothing, and the real pair is unaffected",
        arguments: StoreKind.allCases
    )
    func tenantGuard(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        try await assignMany(f, ledger, count: 2, user: f.a)
        #expect(try await ledger.page(tenant: f.globex, user: f.a.id, limit: 5).items.isEmpty)
        #expect(try await ledger.unreadCount(tenant: f.globex, user: f.a.id) == 0)
        #expect(try await ledger.page(tenant: f.acme, user: f.a.id, limit: 5).items.count == 2)
        #expect(
            try await ledger.item(tenant: f.globex, user: f.a.id, impulse: try ImpulseID("one"), mark: .read) == nil
        )
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.a.id) == 2)
    }
}

/// The group commit's bound on what a crash can lose: marks submitted without waiting are committed within
/// `maximumLag`, or the next submitter waits.
@Suite("Mark writer", .timeLimit(.minutes(3)))
struct MarkWriterTests {
    @Test("A submitter waits while an earlier submitted mark has waited past the lag bound for its commit")
    func lagBound() async throws {
        let f = try await StoreFixture.make()
        // The writer's store waits for the lock below (as behind a long transaction) instead of failing.
        let store = try await SQLiteStore(
            configuration: .init(path: f.location, busyTimeout: .seconds(20)),
            logger: StoreFixture.logger
        )
        let clock = ManualClock()
        let writer = MarkWriter(store: store, maximumLag: .milliseconds(200), clock: clock)
        func mark(_ id: Int64) -> DeliveryMark {
            DeliveryMark(
                tenant: f.acme,
                delivery: DeliveryID(id),
                kind: .pushed(apnsID: "a", channels: .apns),
                at: Date()
            )
        }
        let lock = try await SQLiteWriteLock.take(path: f.location)
        await writer.submit([mark(1)])  // queued; its commit waits for the lock
        // Within the bound, a submitter goes on at once.
        clock.advance(by: .milliseconds(150))
        await writer.submit([])
        #expect(await writer.waitingSubmitters == 0)
        // The first mark has waited 900 ms: the next submitter is held back until the commit.
        clock.advance(by: .milliseconds(750))
        let submitted = ManagedAtomicFlag()
        let second = Task {
            await writer.submit([mark(2)])
            submitted.set()
        }
        #expect(try await eventually { await writer.waitingSubmitters == 1 })
        #expect(!submitted.isSet)
        try await lock.release()
        await second.value
        #expect(submitted.isSet)
        await writer.drain()
    }
}

/// A flag set from another task.
final class ManagedAtomicFlag: Sendable {
    private let state = Mutex(false)
    func set() { state.withLock { $0 = true } }
    var isSet: Bool { state.withLock { $0 } }
}

@Suite("Delivery ledger and the catalog")
struct LedgerCatalogTests {
    @Test(
        "Pages show the catalog's content as it is now, and only a deleted tenant drops the users' hot state",
        arguments: StoreKind.allCases
    )
    func contentFollowsCatalog(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store, ttl: .seconds(3600)))
        _ = try await ledger.assign([
            NewDelivery(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"), kind: .manual, assignedAt: Date())
        ])
        #expect(try await ledger.page(tenant: f.acme, user: f.a.id, limit: 5).items.map(\.impulse.title) == ["one"])
        #expect(await ledger.cachedUserCount() == 1)

        // Another process re-imports the impulse with a new title; the feed reports a catalog change.
        let other = try await StoreFixture.open(kind, f.location)
        var impulse = try #require(try await other.impulse(tenant: f.acme, id: ImpulseID("one")))
        impulse.title = "One, reworded"
        _ = try await other.importImpulses([impulse], tenant: f.acme)
        let change = StoreChange(sequence: 0, tenant: f.acme, subject: .catalog, origin: "other")
        ledger.catalog.forget(change.tenant)
        await ledger.apply(change)
        #expect(await ledger.cachedUserCount() == 1)  // the hot state stays: it holds no content
        let page = try await ledger.page(tenant: f.acme, user: f.a.id, limit: 5)
        #expect(page.items.map(\.impulse.title) == ["One, reworded"])
        #expect(
            try await ledger.item(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"), mark: nil)?.impulse.title
                == "One, reworded"
        )

        // The tenant is deleted: its users' hot state goes with it.
        _ = try await other.deleteTenant(
            f.acme,
            audit: AuditEntry(.commandLine, "tenant.delete", tenant: f.acme, target: "tenant:acme")
        )
        ledger.catalog.forget(change.tenant)
        await ledger.apply(change)
        #expect(await ledger.cachedUserCount() == 0)
        #expect(try await ledger.page(tenant: f.acme, user: f.a.id, limit: 5).items.isEmpty)
    }
}
