import Foundation

/// A user's row in the due index, with what the scheduler needs to decide about it.
public struct ScheduleEntry: Sendable, Equatable {
    public var tenant: TenantID
    public var user: UserID
    /// The stored fire time, as read: updates are conditional on it (a preference change in between wins).
    public var fireAt: Date
    /// The day this fire is for; nil when the row must be planned (a new user, changed preferences).
    public var localDate: LocalDate?
    /// The last day a scheduled impulse was recorded for.
    public var lastDate: LocalDate?
    public var enabled: Bool
    public var language: String?
    public var lifeAreas: LifeAreaScores
    public var preferences: DeliveryPreferences
    /// For a user never delivered to: no day whose time comes before this is planned (``FirstDelivery``).
    public var notBefore: Date?
    /// What learning the user's delivery time needs, read for tenants that learn it (nil: fixed times).
    public var timing: TimingInputs?

    public init(
        tenant: TenantID,
        user: UserID,
        fireAt: Date,
        localDate: LocalDate?,
        lastDate: LocalDate?,
        enabled: Bool = true,
        language: String? = nil,
        lifeAreas: LifeAreaScores = .neutral,
        preferences: DeliveryPreferences = .init(),
        notBefore: Date? = nil,
        timing: TimingInputs? = nil
    ) {
        self.tenant = tenant
        self.user = user
        self.fireAt = fireAt
        self.localDate = localDate
        self.lastDate = lastDate
        self.enabled = enabled
        self.language = language
        self.lifeAreas = lifeAreas
        self.preferences = preferences
        self.notBefore = notBefore
        self.timing = timing
    }
}

/// The next fire of a user's row: the day it is for and when.
public struct PlannedFire: Sendable, Equatable {
    public var date: LocalDate
    public var fireAt: Date

    public init(date: LocalDate, fireAt: Date) {
        self.date = date
        self.fireAt = fireAt
    }
}

/// Decides what happens to a due row. Pure: the ``Scheduler`` executes the action.
public struct DispatchPlanner: Sendable {
    /// A day whose time passed longer ago than this (the broker was down) is skipped, not delivered late.
    public var staleness: Duration
    public var spreadWindow: Duration

    public init(staleness: Duration, spreadWindow: Duration) {
        self.staleness = staleness
        self.spreadWindow = spreadWindow
    }

    public enum Action: Sendable, Equatable {
        /// Record the scheduled impulse for the day, then move the row to `next`.
        case deliver(LocalDate, next: PlannedFire?)
        /// The day is too old: move on to `next` without delivering.
        case skipStale(LocalDate, next: PlannedFire?)
        /// The row had no (valid) plan: set it to `next`.
        case plan(next: PlannedFire?)
        /// The user is disabled: take the row out of the index until re-enabled.
        case park
    }

    public func decide(_ entry: ScheduleEntry, tenant: Tenant, now: Date) -> Action {
        guard entry.enabled else { return .park }
        let schedule = schedule(for: entry, tenant: tenant)
        let earliest = now.addingTimeInterval(-staleness.seconds)
        func next(after date: LocalDate?, notBefore floor: Date) -> PlannedFire? {
            schedule.next(after: date, notBefore: floor).map { PlannedFire(date: $0.date, fireAt: $0.fireAt) }
        }
        // A user never delivered to starts no earlier than their row allows (``FirstDelivery``).
        let start = entry.lastDate == nil ? max(earliest, entry.notBefore ?? earliest) : earliest
        guard let date = entry.localDate, entry.lastDate.map({ date > $0 }) ?? true else {
            return .plan(next: next(after: entry.lastDate, notBefore: start))
        }
        guard entry.fireAt <= now else { return .plan(next: next(after: entry.lastDate, notBefore: start)) }
        if entry.fireAt < earliest { return .skipStale(date, next: next(after: date, notBefore: earliest)) }
        return .deliver(date, next: next(after: date, notBefore: earliest))
    }

    /// What an action adds to the day-level report (nil for one that only plans or parks): the day that came, and
    /// the days its user's weekdays leave out before the next one.
    public func tally(_ action: Action, _ entry: ScheduleEntry, tenant: Tenant) -> DayTally? {
        let schedule = schedule(for: entry, tenant: tenant)
        func skipped(after date: LocalDate, before next: PlannedFire?) -> [LocalDate] {
            guard let next, next.date.dayNumber - date.dayNumber > 1 else { return [] }
            return (date.dayNumber + 1..<min(next.date.dayNumber, date.dayNumber + 14)).map(LocalDate.init(dayNumber:))
                .filter { !schedule.weekdays.contains($0.isoWeekday) }
        }
        switch action {
        case .deliver(let date, let next):
            let deferred = schedule.quietHours?.contains(schedule.wallTime(for: date)) ?? false
            return DayTally(
                date: date,
                deferredByQuietHours: deferred,
                skippedWeekdays: skipped(after: date, before: next)
            )
        case .skipStale(let date, let next):
            return DayTally(date: date, stale: true, skippedWeekdays: skipped(after: date, before: next))
        case .plan, .park:
            return nil
        }
    }

    public func schedule(for entry: ScheduleEntry, tenant: Tenant) -> DailySchedule {
        DailySchedule(
            user: entry.user,
            tenant: tenant,
            preferences: entry.preferences,
            spreadWindow: spreadWindow,
            timing: entry.timing
        )
    }
}

extension Duration {
    /// The duration in seconds, with attosecond precision dropped below a nanosecond.
    public var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds / 1_000_000_000) / 1e9
    }
}
