import Foundation

/// One shard of the delivery ledger: the hot state of the users that hash to it.
///
/// Re-entrant like every actor: state is re-read after each `await`, and a load in progress is shared by
/// concurrent callers instead of being repeated.
actor LedgerShard {
    /// Users are keyed with their tenant, so a mismatched pair can never read or poison another's state.
    struct Key: Hashable {
        var tenant: TenantID
        var user: UserID
    }

    private let store: any LedgerStore
    /// The content of the deliveries it shows: the process's one catalog cache, never a copy of its own.
    private let catalog: CatalogCache
    private let writer: MarkWriter
    private let configuration: LedgerConfiguration
    private var users: [Key: UserLedger] = [:]
    private var loading: [Key: Task<UserLedger, any Error>] = [:]
    /// Bumped by invalidation, so a load that started before it is not cached.
    private var generation: [Key: UInt64] = [:]
    private var useCounter: UInt64 = 0

    init(store: any LedgerStore, catalog: CatalogCache, writer: MarkWriter, configuration: LedgerConfiguration) {
        self.store = store
        self.catalog = catalog
        self.writer = writer
        self.configuration = configuration
    }

    var cachedUserCount: Int { users.count }

    func page(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID?,
        before: DeliveryID?,
        limit: Int,
        markFetched: Date?
    )
        async throws -> (items: [DeliveredImpulse], unreadCount: Int)
    {
        let key = Key(tenant: tenant, user: user)
        var ledger = try await load(tenant: tenant, user: user)
        var items: [DeliveredImpulse]
        if before == nil, let hot = ledger.page(after: after, limit: limit) {
            items = try await content(hot, tenant: tenant)
        } else {
            items = try await store.deliveredImpulses(
                tenant: tenant,
                user: user,
                after: after,
                before: before,
                limit: limit
            )
        }
        if let now = markFetched {
            let marks = items.filter { $0.delivery.fetchedAt == nil }.map {
                DeliveryMark(tenant: tenant, delivery: $0.delivery.id, kind: .fetched, at: now)
            }
            if !marks.isEmpty {
                try await writer.write(marks)
                items = items.map { item in
                    var item = item
                    if item.delivery.fetchedAt == nil { item.delivery.fetchedAt = now }
                    return item
                }
                users[key]?.apply(marks)
            }
        }
        ledger = users[key] ?? ledger
        return (items, ledger.unreadCount)
    }

    func item(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        mark: DeliveryMark.Kind?,
        at now: Date
    )
        async throws -> DeliveredImpulse?
    {
        let key = Key(tenant: tenant, user: user)
        let ledger = try await load(tenant: tenant, user: user)
        var found: DeliveredImpulse?
        if ledger.knowsNewest(impulse) {
            if let delivery = ledger.item(impulse) { found = try await content([delivery], tenant: tenant).first }
        } else {
            found = try await store.deliveredImpulse(tenant: tenant, user: user, impulse: impulse)
        }
        guard var item = found, let kind = mark else { return found }
        let needed = kind == .read ? item.delivery.readAt == nil : item.delivery.fetchedAt == nil
        guard needed else { return item }
        let delivery = DeliveryMark(tenant: tenant, delivery: item.delivery.id, kind: kind, at: now)
        try await writer.write([delivery])
        if kind == .read {
            item.delivery.readAt = now
            if users[key]?.item(impulse)?.id != item.delivery.id {
                let count = try await store.unreadCount(tenant: tenant, user: user)
                users[key]?.reset(unreadCount: count)
            }
        }
        if item.delivery.fetchedAt == nil { item.delivery.fetchedAt = now }
        users[key]?.apply([delivery])
        return item
    }

    /// Applies marks already written (or queued for the next group commit) to the hot state of cached users.
    func applied(_ marks: [(mark: DeliveryMark, user: UserID)]) {
        for (mark, user) in marks { users[Key(tenant: mark.tenant, user: user)]?.apply([mark]) }
    }

    func unreadCount(tenant: TenantID, user: UserID) async throws -> Int {
        try await load(tenant: tenant, user: user).unreadCount
    }

    /// Adds freshly recorded deliveries to the cached users among them; the others load them from the store later.
    func recorded(_ byUser: [UserID: [Delivery]]) {
        for (user, deliveries) in byUser { recorded(deliveries, user: user) }
    }

    /// Adds freshly recorded deliveries to a cached user; an uncached user loads them from the store later.
    func recorded(_ deliveries: [Delivery], user: UserID) {
        guard let tenant = deliveries.first?.tenant else { return }
        let key = Key(tenant: tenant, user: user)
        users[key]?.insert(deliveries)
    }

    /// The deliveries with their impulses' content, as the catalog has it now. A delivery whose impulse is gone (its
    /// tenant was deleted) is left out, as the store's join leaves it out.
    private func content(_ deliveries: [Delivery], tenant: TenantID) async throws -> [DeliveredImpulse] {
        var items: [DeliveredImpulse] = []
        items.reserveCapacity(deliveries.count)
        for delivery in deliveries {
            guard let impulse = try await catalog.impulse(tenant: tenant, id: delivery.impulse) else { continue }
            items.append(DeliveredImpulse(delivery: delivery, impulse: impulse))
        }
        return items
    }

    /// Drops a user's hot state (another process changed it); the next access reloads from the store.
    func invalidate(tenant: TenantID, user: UserID) {
        let key = Key(tenant: tenant, user: user)
        users[key] = nil
        generation[key, default: 0] &+= 1
    }

    func invalidate(tenant: TenantID, users: [UserID]) {
        for user in users { invalidate(tenant: tenant, user: user) }
    }

    func invalidate(tenant: TenantID) {
        for key in users.keys where key.tenant == tenant {
            invalidate(tenant: tenant, user: key.user)
        }
    }

    private func load(tenant: TenantID, user: UserID) async throws -> UserLedger {
        let key = Key(tenant: tenant, user: user)
        useCounter &+= 1
        if let cached = users[key] {
            users[key]?.lastUsed = useCounter
            return cached
        }
        if let running = loading[key] { return try await running.value }
        let startGeneration = generation[key, default: 0]
        let capacity = configuration.hotItemsPerUser
        let store = self.store
        let task = Task {
            async let recent = store.deliveredImpulses(
                tenant: tenant,
                user: user,
                after: nil,
                before: nil,
                limit: capacity + 1
            )
            async let unread = store.unreadCount(tenant: tenant, user: user)
            let items = try await recent
            return UserLedger(
                tenant: tenant,
                recent: items.map(\.delivery),
                complete: items.count <= capacity,
                unreadCount: try await unread,
                capacity: capacity,
                lastUsed: 0
            )
        }
        loading[key] = task
        defer { loading[key] = nil }
        var ledger = try await task.value
        ledger.lastUsed = useCounter
        if generation[key, default: 0] == startGeneration, users[key] == nil {
            users[key] = ledger
            evictIfNeeded()
        }
        return users[key] ?? ledger
    }

    /// Drops the least recently used tenth when over capacity: one sort per tenth, amortised O(log n) per load.
    private func evictIfNeeded() {
        guard users.count > configuration.cachedUsersPerShard else { return }
        let victims = users.sorted { $0.value.lastUsed < $1.value.lastUsed }.prefix(max(1, users.count / 10))
        for (key, _) in victims { users[key] = nil }
    }
}
