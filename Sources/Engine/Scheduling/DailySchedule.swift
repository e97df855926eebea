import Foundation

/// When one user's daily impulse fires: the user's preferences resolved against the tenant's defaults.
///
/// Pure: no clock, no I/O. Wall times are resolved in the user's IANA zone, so daylight-saving changes and the
/// date line are handled by the zone data:
/// - a time that does not exist that day (spring forward) fires at the next valid instant, the end of the gap;
/// - a time that exists twice (fall back) fires at the first of the two instants, once;
/// - a date that does not exist at all in the zone (Samoa skipped 2011-12-30) is not a delivery day;
/// - a delivery time inside the quiet hours moves to their end (the next morning for a window that wraps
///   midnight), and the ledger date stays the day it is for;
/// - each user fires at a fixed offset within the spreading window, so a popular time is not one spike.
public struct DailySchedule: Sendable, Equatable {
    public var timeZone: TimeZone
    public var deliveryTime: LocalTime
    public var quietHours: QuietHours?
    public var weekdays: Weekdays
    /// Seconds added to the wall time, `0..<spreadWindow`.
    public var spreadSeconds: Int
    /// The user's learned delivery time, which replaces `deliveryTime` day by day (nil: fixed times).
    public var learned: LearnedSchedule?

    public init(
        timeZone: TimeZone,
        deliveryTime: LocalTime,
        quietHours: QuietHours? = nil,
        weekdays: Weekdays = .all,
        spreadSeconds: Int = 0
    ) {
        self.timeZone = timeZone
        self.deliveryTime = deliveryTime
        self.quietHours = quietHours
        self.weekdays = weekdays
        self.spreadSeconds = max(0, spreadSeconds)
    }

    /// The user's schedule under the tenant's defaults. An unknown stored zone falls back to the tenant's; the user's
    /// quiet hours, or the tenant's; the user's weekdays among the tenant's (the tenant's when none of them is one).
    public init(
        user: UserID,
        tenant: Tenant,
        preferences: DeliveryPreferences,
        spreadWindow: Duration,
        timing: TimingInputs? = nil
    ) {
        let zone =
            preferences.timeZone.flatMap(TimeZone.init(identifier:)) ?? TimeZone(identifier: tenant.defaultTimeZone)
            ?? TimeZone(secondsFromGMT: 0) ?? .current
        let window = Int(spreadWindow.components.seconds)
        let offset = window > 0 ? Int(stableHash("spread", tenant.id.rawValue, user.description) % UInt64(window)) : 0
        self.init(
            timeZone: zone,
            deliveryTime: preferences.deliveryTime ?? tenant.defaultDeliveryTime,
            quietHours: preferences.quietHours ?? tenant.defaultQuietHours,
            weekdays: preferences.weekdays.meeting(tenant.weekdays),
            spreadSeconds: offset
        )
        if tenant.learnedTiming.enabled, let timing {
            var subject = LearnedTiming.Subject(
                tenant: tenant.id,
                user: user,
                stated: deliveryTime,
                ownTime: preferences.deliveryTime != nil,
                optedIn: timing.optedIn,
                quietHours: quietHours,
                evidence: timing.evidence
            )
            subject.previous = timing.previous
            learned = LearnedSchedule(timing: tenant.learnedTiming, subject: subject, prior: timing.prior)
        }
    }

    /// The user's local date at `instant`.
    public func localDate(at instant: Date) -> LocalDate {
        LocalDate(
            instant: instant.timeIntervalSince1970,
            offsetSeconds: timeZone.secondsFromGMT(for: instant)
        )
    }

    /// The instant the impulse for `date` fires, or nil when `date` is not a delivery day (weekday not chosen,
    /// or the date does not exist in the zone).
    public func fireInstant(for date: LocalDate) -> Date? {
        guard weekdays.contains(date.isoWeekday) else { return nil }
        var wall = wallTime(for: date)
        var day = date
        if let quietHours, quietHours.contains(wall) {
            if quietHours.end < wall { day = day.adding(days: 1) }
            wall = quietHours.end
        }
        guard let instant = resolve(day, wall) else { return nil }
        return instant.addingTimeInterval(Double(spreadSeconds))
    }

    /// The day's delivery time before quiet hours: the learned one, or the stated one.
    public func wallTime(for date: LocalDate) -> LocalTime {
        learned?.time(for: date) ?? deliveryTime
    }

    /// The first delivery date after `last` whose instant is not before `earliest`, with that instant.
    ///
    /// `earliest` is "now minus the staleness limit": a day whose time passed less than that ago is still
    /// delivered (once: `last` moves past it), an older one is skipped.
    public func next(after last: LocalDate?, notBefore earliest: Date) -> (date: LocalDate, fireAt: Date)? {
        // Yesterday is a candidate too: quiet hours can move its instant into today.
        var date = localDate(at: earliest).adding(days: -1)
        if let last, last >= date { date = last.adding(days: 1) }
        // Weekdays are never empty, so a week holds a delivery day; gaps in zone data cost a day each.
        for _ in 0..<14 {
            if let instant = fireInstant(for: date), instant >= earliest { return (date, instant) }
            date = date.adding(days: 1)
        }
        return nil
    }

    /// The instant of a wall time on a date in the zone, as described on the type.
    func resolve(_ date: LocalDate, _ time: LocalTime) -> Date? {
        let naive = Double(date.dayNumber * 86_400 + time.minuteOfDay * 60)
        let before = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: naive - 86_400))
        let after = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: naive + 86_400))
        var found: Double?
        for offset in Set([before, after]) {
            let candidate = naive - Double(offset)
            if timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: candidate)) == offset {
                found = min(found ?? candidate, candidate)
            }
        }
        if found == nil, before != after {
            // In a gap: find the transition between the two readings, to the second.
            var low = naive - Double(max(before, after))
            var high = naive - Double(min(before, after))
            let startOffset = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: low))
            while high - low > 1 {
                let middle = ((low + high) / 2).rounded(.down)
                if timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: middle)) == startOffset {
                    low = middle
                } else {
                    high = middle
                }
            }
            found = high
        }
        guard let found else { return nil }
        let instant = Date(timeIntervalSince1970: found)
        // The end of a gap can fall on the next day (a skipped date): that date has no delivery.
        return localDate(at: instant) == date ? instant : nil
    }
}

/// What learning a user's delivery time needs: what their deliveries showed, the times of their last deliveries
/// per day kind, whether they opted in (a time they set themselves is kept otherwise), and their tenant's
/// population. The scheduler reads it for tenants that learn times.
public struct TimingInputs: Sendable, Equatable {
    public var evidence: ReadEvidence
    /// By ``DayKind``: the weekday's and the weekend's last delivery time (nil: none yet).
    public var previous: [LocalTime?]
    public var optedIn: Bool
    public var prior: PopulationPrior

    public init(
        evidence: ReadEvidence = ReadEvidence(),
        previous: [LocalTime?] = [nil, nil],
        optedIn: Bool = false,
        prior: PopulationPrior = PopulationPrior(ReadEvidence())
    ) {
        self.evidence = evidence
        self.previous = previous
        self.optedIn = optedIn
        self.prior = prior
    }
}

/// A user's learned delivery time inside their schedule: the model asked for each day's wall time.
public struct LearnedSchedule: Sendable, Equatable {
    public var timing: LearnedTiming
    public var subject: LearnedTiming.Subject
    public var prior: PopulationPrior

    /// The day's wall time and why.
    public func choice(for date: LocalDate) -> SendTimeChoice { timing.choose(for: subject, on: date, prior: prior) }

    func time(for date: LocalDate) -> LocalTime { choice(for: date).time }
}
