import Foundation

/// The in-memory state of one user's ledger: the newest deliveries and the unread count.
///
/// A value type with no I/O: the shard loads it from the store and applies the same changes it writes. It holds
/// no impulse content: the shard joins that from the process's one catalog cache when it answers, so a catalog
/// change never has to reach it.
struct UserLedger: Sendable {
    let tenant: TenantID
    /// Newest first, at most the configured number of hot items.
    private(set) var recent: [Delivery]
    /// Whether `recent` holds every delivery the user has.
    private(set) var complete: Bool
    private(set) var unreadCount: Int
    var lastUsed: UInt64
    let capacity: Int

    init(
        tenant: TenantID,
        recent: [Delivery],
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
    func page(after: DeliveryID?, limit: Int) -> [Delivery]? {
        let matching = recent.prefix { delivery in after.map { delivery.id > $0 } ?? true }
        if matching.count >= limit { return Array(matching.prefix(limit)) }
        // Fewer than asked: memory is enough only if it holds everything newer than `after`.
        if complete || matching.count < recent.count { return Array(matching) }
        return nil
    }

    func item(_ impulse: ImpulseID) -> Delivery? {
        recent.first { $0.impulse == impulse }
    }

    /// Whether the newest delivery of `impulse` is known to memory, so the answer of `item` is authoritative.
    func knowsNewest(_ impulse: ImpulseID) -> Bool {
        complete || item(impulse) != nil
    }

    mutating func insert(_ deliveries: [Delivery]) {
        let known = Set(recent.map(\.id))
        let new = deliveries.filter { !known.contains($0.id) }
        recent = Array((new.sorted { $0.id > $1.id } + recent).prefix(capacity))
        if recent.count == capacity { complete = false }
        unreadCount += new.filter { !$0.isRead }.count
    }

    /// Replaces the count after a change memory cannot follow (a delivery older than the hot items was read).
    mutating func reset(unreadCount: Int) {
        self.unreadCount = unreadCount
    }

    mutating func apply(_ marks: [DeliveryMark]) {
        for mark in marks {
            guard let index = recent.firstIndex(where: { $0.id == mark.delivery }) else { continue }
            switch mark.kind {
            case .fetched:
                if recent[index].fetchedAt == nil { recent[index].fetchedAt = mark.at }
            case .pushed(let apnsID, let channels):
                if recent[index].pushedAt == nil {
                    recent[index].pushedAt = mark.at
                    recent[index].apnsID = apnsID
                    recent[index].channels = channels
                }
            case .progress(let apnsID, let channels, _, _):
                if let apnsID, recent[index].pushedAt == nil {
                    recent[index].pushedAt = mark.at
                    recent[index].apnsID = apnsID
                }
                recent[index].channels.formUnion(channels)
            case .settled, .noDevice:
                break
            case .read:
                if recent[index].readAt == nil {
                    recent[index].readAt = mark.at
                    if recent[index].fetchedAt == nil { recent[index].fetchedAt = mark.at }
                    unreadCount = max(0, unreadCount - 1)
                }
            }
        }
    }
}
