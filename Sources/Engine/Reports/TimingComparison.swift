import Foundation

/// One arm's folded deliveries of a day or week: the learned users' or the holdout's.
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

    /// Reads per delivery (nil without any).
    public var readRate: Double? { deliveries > 0 ? Double(read) / Double(deliveries) : nil }

    /// The read rate's 95% Wilson score interval.
    public var readRateInterval: ClosedRange<Double>? {
        TimingStatistics.wilson(successes: read, trials: deliveries)
    }

    /// The median time from push to read, interpolated in its bucket.
    public var medianSecondsToRead: Double? { ReadLatency.median(latency) }

    /// A 95% interval for the median, from the order statistics around the middle rank (the ranks n/2 -+ 1.96
    /// sqrt(n)/2 of the n reads), read off the buckets as the median is.
    public var medianInterval: ClosedRange<Double>? {
        let n = Double(read)
        guard n > 0 else { return nil }
        let spread = 1.96 * n.squareRoot() / 2
        guard let low = ReadLatency.quantile(latency, rank: max(0, n / 2 - spread)),
            let high = ReadLatency.quantile(latency, rank: min(n, n / 2 + spread))
        else { return nil }
        return low...max(low, high)
    }
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

/// Learned times against the holdout for one week (Monday to Sunday, cut to the report's range).
public struct TimingWeek: Sendable, Equatable {
    public var weekStart: LocalDate
    public var learned: TimingArmCounts
    public var holdout: TimingArmCounts

    /// The learned read rate minus the holdout's, with its 95% interval (Newcombe's hybrid score interval from the
    /// two Wilson intervals); nil unless both arms have deliveries.
    public var readRateDifference: Double? {
        guard let learned = learned.readRate, let holdout = holdout.readRate else { return nil }
        return learned - holdout
    }

    public var readRateDifferenceInterval: ClosedRange<Double>? {
        guard let p1 = learned.readRate, let p2 = holdout.readRate, let i1 = learned.readRateInterval,
            let i2 = holdout.readRateInterval
        else { return nil }
        let difference = p1 - p2
        let low =
            difference
            - ((p1 - i1.lowerBound) * (p1 - i1.lowerBound) + (i2.upperBound - p2) * (i2.upperBound - p2)).squareRoot()
        let high =
            difference
            + ((i1.upperBound - p1) * (i1.upperBound - p1) + (p2 - i2.lowerBound) * (p2 - i2.lowerBound)).squareRoot()
        return low...high
    }

    /// The weeks of a range, from the stored days (weeks without any delivery are left out).
    public static func weeks(_ days: [String: TimingDayCounts], range: ReportRange) -> [TimingWeek] {
        var weeks: [LocalDate: (TimingArmCounts, TimingArmCounts)] = [:]
        for day in range.days {
            guard let counts = days[day.description] else { continue }
            let start = day.adding(days: 1 - day.isoWeekday)
            var week = weeks[start] ?? (TimingArmCounts(), TimingArmCounts())
            week.0.add(counts.learned)
            week.1.add(counts.holdout)
            weeks[start] = week
        }
        return weeks.keys.sorted().map { TimingWeek(weekStart: $0, learned: weeks[$0]!.0, holdout: weeks[$0]!.1) }
    }
}

enum TimingStatistics {
    /// The 95% Wilson score interval of a proportion (nil without trials).
    static func wilson(successes: Int, trials: Int) -> ClosedRange<Double>? {
        guard trials > 0 else { return nil }
        let z = 1.96
        let n = Double(trials)
        let p = Double(successes) / n
        let denominator = 1 + z * z / n
        let centre = (p + z * z / (2 * n)) / denominator
        let half = z / denominator * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()
        return max(0, centre - half)...min(1, centre + half)
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
