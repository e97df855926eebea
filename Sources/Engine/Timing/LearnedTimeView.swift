import Foundation

/// A user's learned delivery time as a person reads it (the app, the admin API, the console, the export): whether
/// it applies, the next planned time and why ("07:30, from 23 reads").
public struct LearnedTimeView: Sendable, Equatable, Encodable {
    /// Whether the user's tenant learns delivery times.
    public var tenantLearns: Bool
    /// Whether the user lets a delivery time they set themselves be learned.
    public var optedIn: Bool
    /// Whether the user set their delivery time themselves (then it is kept unless they opted in).
    public var ownTime: Bool
    /// The next planned day and its local time (`HH:mm`), when one is planned.
    public var nextDate: String?
    public var nextTime: String?
    /// `off`, `holdout`, `own-time`, `learning`, `no-reads` or `learned`.
    public var reason: String
    /// What the model learned from: deliveries folded in, and how many of them were read.
    public var deliveries: Int
    public var reads: Int
    /// One line: "07:30, from 23 reads of 30 deliveries", or why the time is fixed.
    public var summary: String

    public init(tenant: Tenant, user: User, timing: UserTiming?) {
        let timing = timing ?? UserTiming()
        tenantLearns = tenant.learnedTiming.enabled
        optedIn = timing.optedIn
        ownTime = user.preferences.deliveryTime != nil
        deliveries = timing.evidence.deliveries()
        reads = timing.evidence.totalReads
        // A plan made before the tenant stopped learning no longer applies.
        let planned = tenantLearns ? timing.planned : nil
        nextDate = planned?.date.description
        nextTime = planned?.time.description
        let reason = planned?.reason ?? .off
        self.reason = reason.name
        switch (planned, reason) {
        case (let planned?, .learned(let reads, let deliveries)):
            summary = "\(planned.time), from \(reads) reads of \(deliveries) deliveries"
        case (let planned?, _):
            summary = "\(planned.time), \(reason.explanation)"
        case (nil, _):
            summary = tenantLearns ? "not planned yet" : TimingReason.off.explanation
        }
    }
}

/// What an export holds of a user's learned time: the view, and the evidence itself, per day kind and half hour
/// (only those with any).
public struct LearnedTimeExport: Sendable, Equatable, Encodable {
    public struct Slot: Sendable, Equatable, Encodable {
        /// `weekday` or `weekend`.
        public var dayKind: String
        /// The half hour's start, `HH:mm`.
        public var from: String
        public var reads: Double
        public var misses: Double
    }

    public var view: LearnedTimeView
    public var evidence: [Slot]

    public init(tenant: Tenant, user: User, timing: UserTiming?) {
        view = LearnedTimeView(tenant: tenant, user: user, timing: timing)
        evidence = (timing?.evidence ?? ReadEvidence()).cells.map {
            Slot(
                dayKind: $0.kind == .weekday ? "weekday" : "weekend",
                from: $0.slot.start.description,
                reads: $0.reads,
                misses: $0.misses
            )
        }
    }
}
