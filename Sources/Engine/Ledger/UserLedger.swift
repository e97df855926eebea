import Foundation

/// The in-memory state of one user's ledger: the newest deliveries and the unread count.
///
/// A value type with no I/O: the shard loads it from the store and applies the same changes it writes.
struct UserLedger: Sendable {
    let tenant: TenantID
    /// Newest first, at most the configured number of hot items.
    private(set) var recent: [DeliveredImpulse]
    /// Whether `recent` holds every delivery the user has.
    private(set) var complete: Bool
    private(set) var unreadCount: Int
    var lastUsed: UInt64
    let capacity: Int

    init(
        tenant: TenantID,
        recent: [DeliveredImpulse],
        complete: Bool,
        unreadCount: Int,
        capacity: Int,
        lastUsed: UInt64
    ) {
        self.tenant = tenant
        self.recent = Array(recent.prefix(capacity))
        self.complete = complete && recent.count <= capacity
        self.unreadCount = unreadCount
        self.capacity = capacity
        self.lastUsed = lastUsed
    }

    /// The page newest first with `id > after`, if memory can answer it without the store.
    func page(after: DeliveryID?, limit: Int) -> [DeliveredImpulse]? {
        let matching = recent.prefix { item in after.map { item.delivery.id > $0 } ?? true }
        if matching.count >= limit { return Array(matching.prefix(limit)) }
        // Fewer than asked: memory is enough only if it holds everything newer than `after`.
        if complete || matching.count < recent.count { return Array(matching) }
        return nil
    }

    func item(_ impulse: ImpulseID) -> DeliveredImpulse? {
        recent.first { $0.delivery.impulse == impulse }
    }

    /// Whether the newest delivery of `impulse` is known to memory, so the answer of `item` is authoritative.
    func knowsNewest(_ impulse: ImpulseID) -> Bool {
        complete || item(impulse) != nil
    }

    mutating func insert(_ items: [DeliveredImpulse]) {
        let known = Set(recent.map(\.delivery.id))
        let new = items.filter { !known.contains($0.delivery.id) }
        recent = Array((new.sorted { $0.delivery.id > $1.delivery.id } + recent).prefix(capacity))
        if recent.count == capacity { complete = false }
        unreadCount += new.filter { !$0.delivery.isRead }.count
    }

    /// Replaces the count after a change memory cannot follow (a delivery older than the hot items was read).
    mutating func reset(unreadCount: Int) {
        self.unreadCount = unreadCount
    }

    mutating func apply(_ marks: [DeliveryMark]) {
        for mark in marks {
            guard let index = recent.firstIndex(where: { $0.delivery.id == mark.delivery }) else { continue }
            switch mark.kind {
            case .fetched:
                if recent[index].delivery.fetchedAt == nil { recent[index].delivery.fetchedAt = mark.at }
            case .pushed(let apnsID):
                if recent[index].delivery.pushedAt == nil {
                    recent[index].delivery.pushedAt = mark.at
                    recent[index].delivery.apnsID = apnsID
                }
            case .settled, .noDevice:
                break
            case .read:
                if recent[index].delivery.readAt == nil {
                    recent[index].delivery.readAt = mark.at
                    if recent[index].delivery.fetchedAt == nil { recent[index].delivery.fetchedAt = mark.at }
                    unreadCount = max(0, unreadCount - 1)
                }
            }
        }
    }
}
