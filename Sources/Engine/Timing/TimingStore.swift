import Foundation

/// Learned delivery times' storage: the scheduler's reads and the user's own state (issue 36).
public protocol TimingStore: Sendable {
    /// For a batch's users of a tenant that learns times: their stored state, their daily deliveries that were
    /// pushed and are not folded in yet (dated after what was folded, and no earlier than `since` for a user with
    /// nothing folded), and the tenant's population.
    func timingBatch(tenant: TenantID, users: [UserID], since: LocalDate) async throws -> TimingBatch
    /// One user's stored state (nil: none yet).
    func userTiming(tenant: TenantID, user: UserID) async throws -> UserTiming?
    /// Whether the user lets a delivery time they set themselves be learned; their row of the due index is planned
    /// again; `audit` is recorded in the same transaction. Throws `notFound` for an unknown user.
    func setTimingOptIn(tenant: TenantID, user: UserID, optedIn: Bool, audit: AuditEntry?) async throws
}

extension ReadEvidence {
    /// Adds counts as a store keeps a population's: reads and misses of one slot of one day kind.
    mutating func add(_ kind: DayKind, _ slot: TimingSlot, reads: Double, misses: Double) {
        var other = ReadEvidence()
        other.reads[kind.rawValue][slot.index] = reads
        other.misses[kind.rawValue][slot.index] = misses
        add(other)
    }

    /// The nonzero cells, as a store writes a population's additions: (kind, slot, reads, misses), in (kind, slot)
    /// order, so that concurrent writers lock rows in one order.
    var cells: [(kind: DayKind, slot: TimingSlot, reads: Double, misses: Double)] {
        DayKind.allCases.flatMap { kind in
            (0..<TimingSlot.count).compactMap { index in
                let (reads, misses) = (self.reads[kind.rawValue][index], self.misses[kind.rawValue][index])
                return reads == 0 && misses == 0 ? nil : (kind, TimingSlot(index), reads, misses)
            }
        }
    }
}

/// A row of the holdout comparison's counts: a tenant's day, arm (0 learned, 1 holdout) and read latency bucket
/// (-1: unread).
struct TimingOutcomeKey: Hashable, Comparable {
    var tenant: TenantID
    var day: String
    var arm: Int
    var bucket: Int

    init(_ tenant: TenantID, _ outcome: TimingOutcomeCount) {
        self.tenant = tenant
        day = outcome.day.description
        arm = outcome.holdout ? 1 : 0
        bucket = outcome.storedBucket
    }

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.tenant.rawValue, lhs.day, lhs.arm, lhs.bucket) < (rhs.tenant.rawValue, rhs.day, rhs.arm, rhs.bucket)
    }
}

/// A row of the holdout comparison per user and week: the arm and the counts added.
struct TimingUserWeekKey: Hashable, Comparable {
    var tenant: TenantID
    var week: String
    var user: Int64
    var arm: Int

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.tenant.rawValue, lhs.week, lhs.user) < (rhs.tenant.rawValue, rhs.week, rhs.user)
    }
}

extension TimingWrite {
    /// The eligible outcomes' counts, as the two comparison tables add them: per day, arm and bucket, and per user,
    /// week and arm (deliveries, read within the hour, read).
    func tally(
        tenant: TenantID,
        user: UserID,
        days: inout [TimingOutcomeKey: Int],
        users: inout [TimingUserWeekKey: [Int]]
    ) {
        for outcome in outcomes where outcome.eligible {
            days[TimingOutcomeKey(tenant, outcome), default: 0] += 1
            let key = TimingUserWeekKey(
                tenant: tenant,
                week: outcome.week.description,
                user: user.rawValue,
                arm: outcome.holdout ? 1 : 0
            )
            var counts = users[key] ?? [0, 0, 0]
            counts[0] += 1
            if outcome.withinHour { counts[1] += 1 }
            if outcome.bucket != nil { counts[2] += 1 }
            users[key] = counts
        }
    }
}
