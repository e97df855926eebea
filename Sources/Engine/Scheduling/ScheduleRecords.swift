import Foundation

/// What the scheduler writes for one due row, atomically with the others of its batch.
public struct ScheduleUpdate: Sendable, Equatable {
    public var tenant: TenantID
    public var user: UserID
    /// The fire time the decision was made on: the row moves only if it still holds it.
    public var expectedFireAt: Date
    /// The day's scheduled impulse, recorded under the (tenant, user, local date) key.
    public var delivery: NewDelivery?
    /// Where the row goes next; nil takes it out of the index (a disabled user).
    public var next: PlannedFire?
    /// What the decision adds to the day-level report, counted when it is committed: with the delivery when it is
    /// new, or (without one) when the row moved.
    public var tally: DayTally?
    /// The user's learned-time state after this decision (tenants that learn times only).
    public var timing: TimingWrite?

    public init(
        tenant: TenantID,
        user: UserID,
        expectedFireAt: Date,
        delivery: NewDelivery?,
        next: PlannedFire?,
        tally: DayTally? = nil,
        timing: TimingWrite? = nil
    ) {
        self.tenant = tenant
        self.user = user
        self.expectedFireAt = expectedFireAt
        self.delivery = delivery
        self.next = next
        self.tally = tally
        self.timing = timing
    }
}

/// A user's request to be pushed an impulse again at a time of their choosing.
public struct Reminder: Sendable, Equatable {
    public var id: Int64
    public var tenant: TenantID
    public var user: UserID
    public var impulse: ImpulseID
    public var fireAt: Date
    public var createdAt: Date

    public init(id: Int64, tenant: TenantID, user: UserID, impulse: ImpulseID, fireAt: Date, createdAt: Date) {
        self.id = id
        self.tenant = tenant
        self.user = user
        self.impulse = impulse
        self.fireAt = fireAt
        self.createdAt = createdAt
    }
}
