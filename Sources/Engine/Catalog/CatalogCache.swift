import Foundation
import Synchronization

/// Tenants and their impulses, re-read after `ttl`, the one cache of them in a process's engine: the push
/// gateway reads titles and topics from it (a million pushes must not cost two million store reads), the
/// scheduler the tenant's settings and the impulses it may choose. A change this process makes or the change feed
/// reports drops the tenant's entry (`forget`); any other change is seen within `ttl`.
final class CatalogCache: Sendable {
    private struct Entry {
        var tenant: Tenant?
        var impulses: [ImpulseID: Impulse]
        /// The impulses in use (a retired one is never chosen again), as the selector reads them.
        var choosable: CatalogIndex
        var loadedAt: ContinuousClock.Instant
    }

    private let store: any CatalogStore & TenantStore
    private let ttl: Duration
    private let entries = Mutex<[TenantID: Entry]>([:])

    init(store: any CatalogStore & TenantStore, ttl: Duration = .seconds(60)) {
        self.store = store
        self.ttl = ttl
    }

    /// Drops the tenant's entry (its catalog or settings changed elsewhere): the next push reads them again.
    func forget(_ id: TenantID) {
        _ = entries.withLock { $0.removeValue(forKey: id) }
    }

    func tenant(_ id: TenantID) async throws -> Tenant? {
        try await entry(id).tenant
    }

    /// The tenant with the impulses the scheduler may choose; nil for a tenant that does not exist.
    func tenantState(_ id: TenantID) async throws -> (tenant: Tenant, catalog: CatalogIndex)? {
        let entry = try await entry(id)
        return entry.tenant.map { ($0, entry.choosable) }
    }

    func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse? {
        if let impulse = try await entry(tenant).impulses[id] { return impulse }
        // Imported since the last load: read it alone rather than waiting for the next refresh.
        return try await store.impulse(tenant: tenant, id: id)
    }

    private func entry(_ id: TenantID) async throws -> Entry {
        if let cached = entries.withLock({ $0[id] }), cached.loadedAt.duration(to: .now) < ttl { return cached }
        // Concurrent misses may load twice; the last one wins, and both are correct.
        let tenant = try await store.tenant(id)
        let impulses = try await store.impulses(tenant: id)
        let entry = Entry(
            tenant: tenant,
            impulses: Dictionary(impulses.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }),
            choosable: CatalogIndex(impulses.filter { !$0.retired }),
            loadedAt: .now
        )
        entries.withLock { $0[id] = entry }
        return entry
    }
}
