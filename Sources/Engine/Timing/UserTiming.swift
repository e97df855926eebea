import Foundation

/// A user's learned-time state as the store keeps it: what their deliveries showed, the times last planned per day
/// kind, whether they opted in, and the day last planned with why. Personal data: a user's export shows it, their
/// erasure removes it.
public struct UserTiming: Sendable, Equatable {
    public var evidence: ReadEvidence
    /// By ``DayKind``: the time last planned for a day of that kind (nil: none yet); the step limit is measured
    /// from it.
    public var previous: [LocalTime?]
    /// Whether the user let a delivery time they set themselves be learned.
    public var optedIn: Bool
    /// The last local date whose delivery was folded into `evidence` (nil: none).
    public var foldedThrough: LocalDate?
    /// The day last planned, its time and why.
    public var planned: PlannedTiming?
    /// The stored row's version (0: no row yet): the scheduler's write is a compare-and-set on it, so that a
    /// delivery is folded in once even when two nodes decide the same row.
    public var version: Int64

    public init(
        evidence: ReadEvidence = ReadEvidence(),
        previous: [LocalTime?] = [nil, nil],
        optedIn: Bool = false,
        foldedThrough: LocalDate? = nil,
        planned: PlannedTiming? = nil,
        version: Int64 = 0
    ) {
        self.evidence = evidence
        self.previous = previous
        self.optedIn = optedIn
        self.foldedThrough = foldedThrough
        self.planned = planned
        self.version = version
    }
}

/// A planned day's delivery time and why it is what it is.
public struct PlannedTiming: Sendable, Equatable {
    public var date: LocalDate
    public var time: LocalTime
    public var reason: TimingReason

    public init(date: LocalDate, time: LocalTime, reason: TimingReason) {
        self.date = date
        self.time = time
        self.reason = reason
    }
}

extension TimingReason {
    /// The name a store keeps (the counts are the evidence's, kept beside it).
    public var name: String {
        switch self {
        case .off: "off"
        case .holdout: "holdout"
        case .ownTime: "own-time"
        case .learning: "learning"
        case .noReads: "no-reads"
        case .fallback: "fallback"
        case .learned: "learned"
        }
    }

    /// The reason a stored name stands for, with the counts of the evidence it was planned with. The deliveries a
    /// user needs are the model's constant (tenants set only `enabled`, the window and the holdout).
    public init(name: String, evidence: ReadEvidence, minimumDeliveries: Int = LearnedTiming().minimumDeliveries) {
        switch name {
        case "holdout": self = .holdout
        case "own-time": self = .ownTime
        case "learning": self = .learning(have: evidence.deliveries(), need: minimumDeliveries)
        case "no-reads": self = .noReads(deliveries: evidence.deliveries())
        case "fallback": self = .fallback
        case "learned": self = .learned(reads: evidence.totalReads, deliveries: evidence.deliveries())
        default: self = .off
        }
    }

    /// One line for a person: "from 23 reads of 30 deliveries", "fixed: in the holdout".
    public var explanation: String {
        switch self {
        case .off: "fixed: learned times are off for the tenant"
        case .holdout: "fixed: in the holdout, which keeps fixed times to measure the effect"
        case .ownTime: "fixed: a time the user set themselves (learned only if they opt in)"
        case .learning(let have, let need): "fixed until enough deliveries: \(have) of \(need)"
        case .fallback: "fixed: learned times are paused for the tenant (its holdout showed them worse)"
        case .noReads(let deliveries): "fixed: none of \(deliveries) deliveries read lately, nothing to learn from"
        case .learned(let reads, let deliveries): "learned from \(reads) reads of \(deliveries) deliveries"
        }
    }
}

/// One pushed daily delivery's times: what the fold reads from the ledger.
public struct TimingOutcome: Sendable, Equatable {
    public var localDate: LocalDate
    public var pushedAt: Date
    public var readAt: Date?

    public init(localDate: LocalDate, pushedAt: Date, readAt: Date?) {
        self.localDate = localDate
        self.pushedAt = pushedAt
        self.readAt = readAt
    }
}

/// What the scheduler reads for a batch's users of a tenant that learns times.
public struct TimingBatch: Sendable, Equatable {
    /// Stored state per user (absent: none yet).
    public var users: [UserID: UserTiming]
    /// Each user's daily deliveries not folded in yet, pushed, oldest first.
    public var outcomes: [UserID: [TimingOutcome]]
    /// The tenant's users' evidence summed.
    public var population: ReadEvidence

    public init(
        users: [UserID: UserTiming] = [:],
        outcomes: [UserID: [TimingOutcome]] = [:],
        population: ReadEvidence = ReadEvidence()
    ) {
        self.users = users
        self.outcomes = outcomes
        self.population = population
    }
}

/// What a batch's commit writes for one user: the new state (its `version` the one read, for the compare-and-set),
/// the evidence it added, which goes to the tenant's population, and the folded days' outcomes, which go to the
/// holdout comparison: both only when the write takes effect, so that a day is counted once.
public struct TimingWrite: Sendable, Equatable {
    public var timing: UserTiming
    public var added: ReadEvidence
    public var outcomes: [TimingOutcomeCount]

    public init(timing: UserTiming, added: ReadEvidence, outcomes: [TimingOutcomeCount] = []) {
        self.timing = timing
        self.added = added
        self.outcomes = outcomes
    }
}

/// A folded delivery as the holdout comparison counts it: its day, its user's arm, and how long it took to be
/// read (a ``ReadLatency`` bucket; nil: not read by the time its day was folded, a day or so after its push).
/// Only users the model may move are counted, in either arm (`eligible`): one who keeps a time they set themselves
/// would dilute the learned arm.
public struct TimingOutcomeCount: Sendable, Hashable {
    public var day: LocalDate
    public var holdout: Bool
    public var bucket: Int?
    public var eligible: Bool

    public init(day: LocalDate, holdout: Bool, bucket: Int?, eligible: Bool = true) {
        self.day = day
        self.holdout = holdout
        self.bucket = bucket
        self.eligible = eligible
    }

    /// The bucket of reads within the hour of the push and every faster one.
    static let withinHourBucket = ReadLatency.bucket(seconds: 3600)

    /// Read within the hour of its push: the goal's measure.
    public var withinHour: Bool { bucket.map { $0 <= Self.withinHourBucket } ?? false }

    /// The Monday of its week.
    public var week: LocalDate { day.adding(days: 1 - day.isoWeekday) }

    /// The bucket as a store keeps it: -1 for unread.
    var storedBucket: Int { bucket ?? -1 }
}

extension UserTiming {
    /// The state with the outcomes of days before `cutoff` folded in, read in the user's zone, and what they
    /// added. An outcome's day kind is its local date's; a read on a later local day counts as not read that day.
    /// Outcomes of `cutoff` and later stay for a later fold (their day is not over). The evidence already held
    /// fades by the days that passed since the last fold (`model.halfLifeDays`).
    public func folding(
        _ outcomes: [TimingOutcome],
        before cutoff: LocalDate,
        in zone: TimeZone,
        holdout: Bool = false,
        eligible: Bool = true,
        model: LearnedTiming = LearnedTiming()
    ) -> (timing: UserTiming, added: ReadEvidence, counts: [TimingOutcomeCount]) {
        var next = self
        var added = ReadEvidence()
        var counts: [TimingOutcomeCount] = []
        for outcome in outcomes.sorted(by: { $0.localDate < $1.localDate }) {
            guard outcome.localDate < cutoff, foldedThrough.map({ outcome.localDate > $0 }) ?? true else { continue }
            let kind = DayKind(isoWeekday: outcome.localDate.isoWeekday)
            let pushed = Self.wall(outcome.pushedAt, in: zone)
            let read = outcome.readAt.map { Self.wall($0, in: zone) }
            let sameDay = read.map { $0.date == pushed.date } ?? false
            added.observe(pushedAt: pushed.time, readAt: sameDay ? read?.time : nil, kind, model: model)
            counts.append(
                TimingOutcomeCount(
                    day: outcome.localDate,
                    holdout: holdout,
                    bucket: outcome.readAt.map {
                        ReadLatency.bucket(seconds: max(0, $0.timeIntervalSince(outcome.pushedAt)))
                    },
                    eligible: eligible
                )
            )
        }
        let through = cutoff.adding(days: -1)
        if let last = foldedThrough, through > last, model.halfLifeDays > 0 {
            next.evidence.fade(by: pow(0.5, Double(through.dayNumber - last.dayNumber) / model.halfLifeDays))
        }
        next.evidence.add(added)
        next.foldedThrough = max(foldedThrough ?? through, through)
        return (next, added, counts)
    }

    public static func wall(_ instant: Date, in zone: TimeZone) -> (date: LocalDate, time: LocalTime) {
        let offset = zone.secondsFromGMT(for: instant)
        let local = Int((instant.timeIntervalSince1970 + Double(offset)).rounded(.down))
        let seconds = ((local % 86_400) + 86_400) % 86_400
        return (
            LocalDate(instant: instant.timeIntervalSince1970, offsetSeconds: offset),
            LocalTime(clampedMinuteOfDay: seconds / 60)
        )
    }

    /// The state after planning `date` at `choice`: the time becomes the last of its day kind.
    public func planning(_ date: LocalDate, _ choice: SendTimeChoice) -> UserTiming {
        var next = self
        next.previous[DayKind(isoWeekday: date.isoWeekday).rawValue] = choice.time
        next.planned = PlannedTiming(date: date, time: choice.time, reason: choice.reason)
        return next
    }
}
