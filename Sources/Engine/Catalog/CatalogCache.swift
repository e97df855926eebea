import Foundation
import Synchronization

/// Tenants and their impulses, the one cache of them in a process: the push gateway reads titles and topics from
/// it (a million pushes must not cost two million store reads), the scheduler the tenant's settings and the
/// impulses it may choose, the ledger the content of the deliveries it shows, the HTTP edge the tenant of every
/// request.
///
/// One rule refreshes it: a change this process makes or the change feed reports drops the tenant's entry
/// (`forget`); any other change is seen within `ttl`. A tenant that does not exist is remembered for
/// `absentTTL` only, and only `maximumAbsent` of them, so that probing made-up tenant names costs a store read
/// each few seconds, not one per request, and cannot fill memory. Concurrent misses share one read.
public final class CatalogCache: Sendable {
    private struct Entry: Sendable {
        var tenant: Tenant?
        var impulses: [ImpulseID: Impulse]
        /// The impulses in use (a retired one is never chosen again), as the selector reads them.
        var choosable: CatalogIndex
        var expires: ContinuousClock.Instant
    }

    private struct Load {
        var token: UInt64
        var task: Task<Entry, any Error>
    }

    /// Store reads started, and misses that joined one already running.
    struct Statistics: Sendable {
        var reads = 0
        var joined = 0
    }

    private struct State {
        var entries: [TenantID: Entry] = [:]
        var loads: [TenantID: Load] = [:]
        var absent = 0
        var nextToken: UInt64 = 0
        var statistics = Statistics()
    }

    private let store: any CatalogStore & TenantStore
    private let ttl: Duration
    private let absentTTL: Duration
    private let maximumAbsent: Int
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    public init(
        store: any CatalogStore & TenantStore,
        ttl: Duration = .seconds(60),
        absentTTL: Duration = .seconds(5),
        maximumAbsent: Int = 10_000,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.store = store
        self.ttl = ttl
        self.absentTTL = absentTTL
        self.maximumAbsent = maximumAbsent
        self.now = now
    }

    /// Drops the tenant's entry (its catalog or settings changed, it was created or deleted): the next reader
    /// reads the store, and a read already running is not kept.
    public func forget(_ id: TenantID) {
        state.withLock { state in
            if let removed = state.entries.removeValue(forKey: id), removed.tenant == nil { state.absent -= 1 }
            state.loads[id] = nil
        }
    }

    /// The tenant, or nil when it does not exist.
    public func tenant(_ id: TenantID) async throws -> Tenant? {
        try await entry(id).tenant
    }

    /// The tenant with the impulses the scheduler may choose; nil for a tenant that does not exist.
    func tenantState(_ id: TenantID) async throws -> (tenant: Tenant, catalog: CatalogIndex)? {
        let entry = try await entry(id)
        return entry.tenant.map { ($0, entry.choosable) }
    }

    /// An impulse of the tenant's catalog, retired ones included (a delivery shows what it delivered).
    public func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse? {
        if let impulse = try await entry(tenant).impulses[id] { return impulse }
        // Imported since the last load: read it alone rather than waiting for the next refresh.
        return try await store.impulse(tenant: tenant, id: id)
    }

    /// Tenants whose entries are held (for tests of the bound on absent ones).
    var cachedCount: Int { state.withLock { $0.entries.count } }

    var statistics: Statistics { state.withLock { $0.statistics } }

    private func entry(_ id: TenantID) async throws -> Entry {
        let instant = now()
        let (cached, load): (Entry?, Load?) = state.withLock { state in
            if let cached = state.entries[id], instant < cached.expires { return (cached, nil) }
            if let running = state.loads[id] {
                state.statistics.joined += 1
                return (nil, running)
            }
            state.statistics.reads += 1
            state.nextToken &+= 1
            // Detached: the read serves every waiter, so it must not run on the first one's executor (an HTTP/2
            // request prefers its connection's event loop, which a busy connection can hold up for all of them).
            let load = Load(token: state.nextToken, task: Task.detached { try await self.read(id) })
            state.loads[id] = load
            return (nil, load)
        }
        if let cached { return cached }
        guard let load else { preconditionFailure("either an entry or a load") }
        do {
            let entry = try await load.task.value
            keep(entry, for: id, from: load.token)
            return entry
        } catch {
            state.withLock { state in
                if state.loads[id]?.token == load.token { state.loads[id] = nil }
            }
            throw error
        }
    }

    /// Keeps what a load read, unless the tenant was forgotten since it started (it may be stale).
    private func keep(_ entry: Entry, for id: TenantID, from token: UInt64) {
        state.withLock { state in
            guard state.loads[id]?.token == token else { return }
            state.loads[id] = nil
            if let previous = state.entries.removeValue(forKey: id), previous.tenant == nil { state.absent -= 1 }
            if entry.tenant == nil {
                if state.absent >= maximumAbsent {
                    // Made-up names by the thousand: forget them all rather than keep count of their ages.
                    state.entries = state.entries.filter { $0.value.tenant != nil }
                    state.absent = 0
                }
                state.absent += 1
            }
            state.entries[id] = entry
        }
    }

    private func read(_ id: TenantID) async throws -> Entry {
        guard let tenant = try await store.tenant(id) else {
            return Entry(tenant: nil, impulses: [:], choosable: CatalogIndex([]), expires: now() + absentTTL)
        }
        let impulses = try await store.impulses(tenant: id)
        return Entry(
            tenant: tenant,
            impulses: Dictionary(impulses.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first }),
            choosable: CatalogIndex(impulses.filter { !$0.retired }),
            expires: now() + ttl
        )
    }
}
