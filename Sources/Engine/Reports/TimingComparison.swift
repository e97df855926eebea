import Foundation

/// One arm's folded deliveries of a day or week, by read latency: the learned users' or the holdout's. Its median
/// time to read stands beside the per-user comparison; no interval is given here, because these counts do not know
/// which deliveries are the same user's.
public struct TimingArmCounts: Sendable, Equatable {
    /// Folded deliveries (pushed daily impulses whose day ended).
    public var deliveries = 0
    /// Those read by the time their day was folded (a day or so after the push), by ``ReadLatency`` bucket.
    public var latency = [Int](repeating: 0, count: ReadLatency.bounds.count + 1)

    public init() {}

    public var read: Int { latency.reduce(0, +) }

    public mutating func add(_ other: TimingArmCounts) {
        deliveries += other.deliveries
        for index in latency.indices { latency[index] += other.latency[index] }
    }

    /// Adds `count` deliveries of a stored bucket (-1: unread).
    mutating func add(bucket: Int, count: Int) {
        deliveries += count
        if latency.indices.contains(bucket) { latency[bucket] += count }
    }

    /// The median time from push to read, interpolated in its bucket.
    public var medianSecondsToRead: Double? { ReadLatency.median(latency) }
}

/// A day's folded deliveries by arm, as the store keeps them.
public struct TimingDayCounts: Sendable, Equatable {
    public var learned = TimingArmCounts()
    public var holdout = TimingArmCounts()

    public init() {}

    /// Adds a stored row: `arm` 0 learned, 1 holdout.
    public mutating func add(arm: Int, bucket: Int, count: Int) {
        if arm == 1 { holdout.add(bucket: bucket, count: count) } else { learned.add(bucket: bucket, count: count) }
    }
}

/// Learned times against the holdout for one week (Monday to Sunday): per user, the shares read within the hour
/// (the goal's measure) and read at all with their differences' intervals (``TimingArmComparison``), and per arm the
/// median time to read (from the daily counts, cut to the report's range).
public struct TimingWeek: Sendable, Equatable {
    public var weekStart: LocalDate
    public var learned: TimingArmCounts
    public var holdout: TimingArmCounts
    public var users: TimingArmComparison

    /// The weeks of a range, from the stored days and user weeks (weeks without any delivery are left out).
    public static func weeks(
        _ days: [String: TimingDayCounts],
        users: [TimingUserWeek],
        range: ReportRange
    ) -> [TimingWeek] {
        var weeks: [LocalDate: (TimingArmCounts, TimingArmCounts)] = [:]
        for day in range.days {
            guard let counts = days[day.description] else { continue }
            let start = day.adding(days: 1 - day.isoWeekday)
            var week = weeks[start] ?? (TimingArmCounts(), TimingArmCounts())
            week.0.add(counts.learned)
            week.1.add(counts.holdout)
            weeks[start] = week
        }
        let byWeek = Dictionary(grouping: users, by: \.week)
        return Set(weeks.keys).union(byWeek.keys).sorted().map { start in
            TimingWeek(
                weekStart: start,
                learned: weeks[start]?.0 ?? TimingArmCounts(),
                holdout: weeks[start]?.1 ?? TimingArmCounts(),
                users: TimingArmComparison(byWeek[start] ?? [])
            )
        }
    }
}

extension ReadLatency {
    /// The time at which `rank` of the reads had been read, interpolated inside its bucket (the last, open bucket
    /// answers its lower bound).
    public static func quantile(_ buckets: [Int], rank: Double) -> Double? {
        let total = buckets.reduce(0, +)
        guard total > 0 else { return nil }
        var below = 0
        for (index, count) in buckets.enumerated() where count > 0 {
            if Double(below + count) >= rank {
                let lower = index == 0 ? 0 : bounds[index - 1]
                guard index < bounds.count else { return lower }
                let fraction = max(0, rank - Double(below)) / Double(count)
                return lower + fraction * (bounds[index] - lower)
            }
            below += count
        }
        return nil
    }
}

/// One user's folded deliveries of a week, as the holdout comparison keeps them: the user is the unit its intervals
/// count (a user's days are not independent of each other). Only users the model may move are kept, in either arm.
public struct TimingUserWeek: Sendable, Equatable {
    public var user: UserID
    /// The week's Monday.
    public var week: LocalDate
    public var holdout: Bool
    public var deliveries: Int
    /// Read within the hour of the push: the goal's measure.
    public var withinHour: Int
    /// Read at all by the time the day was folded.
    public var read: Int

    public init(user: UserID, week: LocalDate, holdout: Bool, deliveries: Int, withinHour: Int, read: Int) {
        self.user = user
        self.week = week
        self.holdout = holdout
        self.deliveries = deliveries
        self.withinHour = withinHour
        self.read = read
    }
}

/// Learned times against the holdout with the user as the unit: the shares of deliveries read within the hour (the
/// headline) and read at all, per arm, and the learned arm's minus the holdout's with a 95% cluster-robust interval
/// (a ratio estimator's variance summed over users, each user's deliveries one cluster).
public struct TimingArmComparison: Sendable, Equatable, Encodable {
    public struct Arm: Sendable, Equatable, Encodable {
        public var users = 0
        public var deliveries = 0
        public var withinHour = 0
        public var read = 0

        public var withinHourRate: Double? { deliveries > 0 ? Double(withinHour) / Double(deliveries) : nil }
        public var readRate: Double? { deliveries > 0 ? Double(read) / Double(deliveries) : nil }
    }

    /// A difference of rates, learned minus holdout, and its interval (nil: too few users in an arm).
    public struct Difference: Sendable, Equatable, Encodable {
        public var estimate: Double
        public var low: Double
        public var high: Double

        /// The interval leaves 0 out: learned is better (> 0) or worse (< 0) than fixed times.
        public var significant: Bool { low > 0 || high < 0 }

        enum CodingKeys: String, CodingKey { case estimate, low, high, significant }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(estimate, forKey: .estimate)
            try container.encode(low, forKey: .low)
            try container.encode(high, forKey: .high)
            try container.encode(significant, forKey: .significant)
        }
    }

    public var learned = Arm()
    public var holdout = Arm()
    public var withinHour: Difference?
    public var read: Difference?

    public init(_ rows: [TimingUserWeek]) {
        var users: [Bool: [UserID: (n: Int, hour: Int, read: Int)]] = [:]
        for row in rows {
            var user = users[row.holdout, default: [:]][row.user] ?? (0, 0, 0)
            user.n += row.deliveries
            user.hour += row.withinHour
            user.read += row.read
            users[row.holdout, default: [:]][row.user] = user
        }
        func arm(_ holdout: Bool) -> Arm {
            let all = users[holdout, default: [:]].values.filter { $0.n > 0 }
            return Arm(
                users: all.count,
                deliveries: all.reduce(0) { $0 + $1.n },
                withinHour: all.reduce(0) { $0 + $1.hour },
                read: all.reduce(0) { $0 + $1.read }
            )
        }
        learned = arm(false)
        holdout = arm(true)
        /// A ratio estimator's variance with users as clusters: m/(m-1) sum (y_i - p n_i)^2 / (sum n_i)^2.
        func variance(_ holdout: Bool, _ successes: ((n: Int, hour: Int, read: Int)) -> Int) -> (Double, Double)? {
            let all = users[holdout, default: [:]].values.filter { $0.n > 0 }
            let total = Double(all.reduce(0) { $0 + $1.n })
            guard all.count >= 2, total > 0 else { return nil }
            let rate = Double(all.reduce(0) { $0 + successes($1) }) / total
            let sum = all.reduce(0.0) {
                let residual = Double(successes($1)) - rate * Double($1.n)
                return $0 + residual * residual
            }
            let m = Double(all.count)
            return (rate, m / (m - 1) * sum / (total * total))
        }
        func difference(_ successes: ((n: Int, hour: Int, read: Int)) -> Int) -> Difference? {
            guard let (p1, v1) = variance(false, successes), let (p2, v2) = variance(true, successes) else {
                return nil
            }
            let half = 1.96 * (v1 + v2).squareRoot()
            return Difference(estimate: p1 - p2, low: p1 - p2 - half, high: p1 - p2 + half)
        }
        withinHour = difference { $0.hour }
        read = difference { $0.read }
    }
}

extension TimingArmComparison.Difference {
    /// In percentage points with its interval: "+4.2 pp (+1.0 to +7.4)".
    public var points: String {
        String(format: "%+.1f pp (%+.1f to %+.1f)", estimate * 100, low * 100, high * 100)
    }
}

extension TimingWeek {
    /// What the comparison shows, in plain words for a programme administrator.
    public var plainSummary: String {
        let learned = users.learned
        let holdout = users.holdout
        guard let difference = users.withinHour, let learnedRate = learned.withinHourRate,
            let holdoutRate = holdout.withinHourRate
        else {
            return "Too few people in an arm to compare yet (\(learned.users) with learned times, \(holdout.users) "
                + "in the holdout)."
        }
        let rates = String(
            format: "%.1f%% of impulses were read within the hour of their push with learned times, %.1f%% at the "
                + "times people set",
            learnedRate * 100,
            holdoutRate * 100
        )
        let people = "\(learned.users) and \(holdout.users) people"
        if difference.low > 0 {
            return "Learned times help: \(rates), a difference of \(difference.points) with 95% confidence, over "
                + "\(people)."
        }
        if difference.high < 0 {
            return "Learned times do worse than the times people set: \(rates), a difference of \(difference.points) "
                + "with 95% confidence, over \(people)."
        }
        return "No clear difference yet: \(rates); the difference, \(difference.points) with 95% confidence, "
            + "includes none, over \(people)."
    }
}
