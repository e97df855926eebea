import Foundation

/// Deliveries and their marks: the delivery ledger's port.
public protocol LedgerStore: Sendable {
    /// Records assignments in one transaction. A scheduled delivery for a (user, local date) that already
    /// exists is not inserted again; the result holds only the rows that were inserted.
    func recordDeliveries(_ deliveries: [NewDelivery]) async throws -> [Delivery]
    /// A user's deliveries, newest first: those with `id > after` and `id < before`, at most `limit`.
    func deliveredImpulses(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID?,
        before: DeliveryID?,
        limit: Int
    ) async throws -> [DeliveredImpulse]
    /// The user's newest delivery of one impulse.
    func deliveredImpulse(tenant: TenantID, user: UserID, impulse: ImpulseID) async throws -> DeliveredImpulse?
    func unreadCount(tenant: TenantID, user: UserID) async throws -> Int
    /// How many deliveries each user of the tenant has (for the admin page).
    func deliveryCounts(tenant: TenantID) async throws -> [UserID: Int]
    /// Applies fetched/read marks in one transaction; a mark never overwrites an earlier timestamp.
    func applyMarks(_ marks: [DeliveryMark]) async throws
    /// Deletes all deliveries of a user; returns how many.
    func clearDeliveries(tenant: TenantID, user: UserID) async throws -> Int
}

/// What the delivery ledger uses: its own port, plus the transactions that record deliveries together with the
/// due index (a day's batch) or with reminders. The content its pages show comes from the ``CatalogCache``.
public typealias DeliveryLedgerStore = LedgerStore & ScheduleStore & ReminderStore
