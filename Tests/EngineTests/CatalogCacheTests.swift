import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Engine

/// The real store behind a count of the tenant reads the cache makes, and a gate that can hold them.
private final class CountingStore: CatalogStore, TenantStore {
    let store: any BrokerStore
    let reads = Mutex(0)
    let gate: Gate?

    init(_ store: any BrokerStore, gate: Gate? = nil) {
        self.store = store
        self.gate = gate
    }

    func tenant(_ id: TenantID) async throws -> Tenant? {
        reads.withLock { $0 += 1 }
        await gate?.pass()
        return try await store.tenant(id)
    }

    func importImpulses(_ impulses: [Impulse], tenant: TenantID) async throws -> (inserted: Int, updated: Int) {
        try await store.importImpulses(impulses, tenant: tenant)
    }
    func impulses(tenant: TenantID) async throws -> [Impulse] { try await store.impulses(tenant: tenant) }
    func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse? {
        try await store.impulse(tenant: tenant, id: id)
    }
    func createTenant(_ tenant: Tenant) async throws { try await store.createTenant(tenant) }
    func tenants() async throws -> [Tenant] { try await store.tenants() }
    func setPushExpiry(tenant: TenantID, _ expiry: PushExpiry) async throws {
        try await store.setPushExpiry(tenant: tenant, expiry)
    }
}

/// Holds whoever passes until it is opened.
private actor Gate {
    private var open = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func pass() async {
        if open { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        open = true
        for waiter in waiting { waiter.resume() }
        waiting = []
    }
}

/// A clock the test moves.
private final class TestClock: Sendable {
    private let instant = Mutex(ContinuousClock.now)
    func now() -> ContinuousClock.Instant { instant.withLock { $0 } }
    func advance(_ duration: Duration) { instant.withLock { $0 = $0.advanced(by: duration) } }
}

@Suite("Catalog cache")
struct CatalogCacheTests {
    @Test("Tenants are kept for the TTL, absent ones for seconds, and forgetting one shows a change at once")
    func lifetimes() async throws {
        let f = try await StoreFixture.make()
        let store = CountingStore(f.store)
        let clock = TestClock()
        let cache = CatalogCache(store: store, ttl: .seconds(60), absentTTL: .seconds(5), now: { clock.now() })
        #expect(try await cache.tenant(f.acme)?.name == "Acme")
        #expect(try await cache.impulse(tenant: f.acme, id: ImpulseID("one"))?.title == "one")
        clock.advance(.seconds(59))
        #expect(try await cache.tenant(f.acme) != nil)
        #expect(store.reads.withLock { $0 } == 1)
        clock.advance(.seconds(2))
        #expect(try await cache.tenant(f.acme) != nil)
        #expect(store.reads.withLock { $0 } == 2)

        // A name that is no tenant: remembered for a few seconds, then asked again.
        let later = try TenantID("later")
        #expect(try await cache.tenant(later) == nil)
        #expect(try await cache.tenant(later) == nil)
        #expect(store.reads.withLock { $0 } == 3)
        try await f.store.createTenant(try Tenant(id: later, name: "Later", apnsTopic: "t"))
        #expect(try await cache.tenant(later) == nil)  // still the remembered absence
        clock.advance(.seconds(6))
        #expect(try await cache.tenant(later)?.name == "Later")

        // A change this process makes or the feed reports: `forget` shows it without waiting for the TTL.
        try await f.store.setPushExpiry(tenant: f.acme, .immediate)
        #expect(try await cache.tenant(f.acme)?.pushExpiry == .endOfDay)
        cache.forget(f.acme)
        #expect(try await cache.tenant(f.acme)?.pushExpiry == .immediate)
    }

    @Test("Concurrent misses share one store read")
    func sharedRead() async throws {
        let f = try await StoreFixture.make()
        let gate = Gate()
        let store = CountingStore(f.store, gate: gate)
        let cache = CatalogCache(store: store)
        let readers = 20
        let results = Task {
            try await withThrowingTaskGroup(of: Tenant?.self) { group in
                for _ in 0..<readers { group.addTask { try await cache.tenant(f.acme) } }
                return try await group.reduce(into: [Tenant?]()) { $0.append($1) }
            }
        }
        // Every reader but the first joins the read in flight, held at the store.
        #expect(try await eventually(seconds: 30) { cache.statistics.joined == readers - 1 })
        await gate.release()
        let tenants = try await results.value
        #expect(tenants.count == readers && tenants.allSatisfy { $0?.name == "Acme" })
        #expect(store.reads.withLock { $0 } == 1)
    }

    @Test("A read that started before a tenant was forgotten is not kept")
    func forgottenDuringRead() async throws {
        let f = try await StoreFixture.make()
        let gate = Gate()
        let store = CountingStore(f.store, gate: gate)
        let cache = CatalogCache(store: store)
        let first = Task { try await cache.tenant(f.acme) }
        #expect(try await eventually(seconds: 30) { store.reads.withLock { $0 } == 1 })
        cache.forget(f.acme)
        await gate.release()
        _ = try await first.value
        _ = try await cache.tenant(f.acme)
        #expect(store.reads.withLock { $0 } == 2)
    }

    @Test("Made-up tenant names cannot fill memory")
    func absentBound() async throws {
        let f = try await StoreFixture.make()
        let cache = CatalogCache(store: f.store, maximumAbsent: 5)
        _ = try await cache.tenant(f.acme)
        for index in 0..<40 { #expect(try await cache.tenant(TenantID("probe-\(index)")) == nil) }
        #expect(cache.cachedCount <= 6)
        #expect(try await cache.tenant(f.acme) != nil)
    }
}
