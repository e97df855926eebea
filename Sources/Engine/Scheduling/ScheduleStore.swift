import Foundation

/// The due index and the day's decisions: the scheduler's port.
public protocol ScheduleStore: Sendable {
    /// Rows of the due index whose fire time is not after `now`, earliest first, at most `limit`: the only way
    /// the scheduler finds work, so its cost follows what is due, not the user count. A store shared by several
    /// nodes claims the rows for the caller until its commit, and leaves out rows other nodes have claimed.
    /// With `after`, only rows after that one in (fire time, user) order: the next batch can be read while the
    /// previous one is still being committed.
    func dueSchedules(notAfter now: Date, after: ScheduleCursor?, limit: Int) async throws -> [ScheduleEntry]
    /// One user's row of the due index (for inspection and tests).
    func scheduleEntry(tenant: TenantID, user: UserID) async throws -> ScheduleEntry?
    /// The earliest fire time of any row or reminder.
    func nextFireTime() async throws -> Date?
    /// What each user had since `since` and how far they are in each series.
    func selectionHistories(tenant: TenantID, users: [UserID], since: Date) async throws -> [UserID: SelectionHistory]
    /// Applies a batch of decisions in one transaction: records the day's deliveries (a (user, local date) that
    /// already has one is not recorded again) and moves each row whose fire time is still the one decided on.
    /// Returns the deliveries that were recorded.
    func commitSchedules(_ updates: [ScheduleUpdate]) async throws -> [Delivery]
    /// Deliveries waiting for the push gateway, assigned since `assignedAfter`, by id, after `after`.
    /// A store shared by several nodes leases them to the caller and leaves out those another node holds.
    func unsettledDeliveries(assignedAfter: Date, after: DeliveryID?, limit: Int) async throws -> [Delivery]
    /// Settles up to `limit` deliveries still unsettled that were assigned before `assignedBefore` (the sweep no
    /// longer pushes them: a device whose channel kept failing that long is given up), counting each in the reports
    /// (as failed when none of its devices took the push) and as a `delivery.failed` event. A store shared by
    /// several nodes leaves out those another node holds a lease on. Returns how many per tenant.
    func giveUpUnsettled(assignedBefore: Date, limit: Int) async throws -> [TenantID: Int]
    /// Whether ``unsettledDeliveries(assignedAfter:after:limit:)`` leases what it returns, so that the deliveries
    /// being pushed (by this node or another) are never among them: then a sweep takes every delivery it gets.
    var leasesUnsettledDeliveries: Bool { get }
    /// How many batches' commits the scheduler may have under way at once (1 or more): a store with one writer
    /// gains nothing from a second, a database server works on one batch's transaction while it runs another's.
    var concurrentCommits: Int { get }
    /// Ends this node's claims on due rows and leases on deliveries at once, so that other nodes take them (this
    /// node cannot push); nil for a store with no other node to take them.
    func handBackWork() async throws -> EndedNode?
}

extension ScheduleStore {
    public var leasesUnsettledDeliveries: Bool { false }
    public var concurrentCommits: Int { 1 }
    public func handBackWork() async throws -> EndedNode? { nil }
}

/// A position in the due index's (fire time, user) order.
public struct ScheduleCursor: Sendable, Equatable {
    public var fireAt: Date
    public var user: UserID

    public init(fireAt: Date, user: UserID) {
        self.fireAt = fireAt
        self.user = user
    }
}

extension ScheduleStore {
    public func dueSchedules(notAfter now: Date, limit: Int) async throws -> [ScheduleEntry] {
        try await dueSchedules(notAfter: now, after: nil, limit: limit)
    }
}

/// What the scheduler reads and writes: the due index, reminders, the catalog and tenants to decide with, and
/// the push targets it reads ahead for the gateway.
public typealias SchedulerStore = ScheduleStore & ReminderStore & CatalogStore & TenantStore & PushTargetStore
    & TimingStore
