import Foundation
import Testing

@testable import Engine

/// The holdout comparison's statistics against published values, and its weeks.
@Suite("Learned times against the holdout")
struct TimingComparisonTests {
    func arm(deliveries: Int, reads: [Int: Int]) -> TimingArmCounts {
        var counts = TimingArmCounts()
        counts.add(bucket: -1, count: deliveries - reads.values.reduce(0, +))
        for (bucket, count) in reads { counts.add(bucket: bucket, count: count) }
        return counts
    }

    @Test("Wilson's interval for 8 of 10 and Newcombe's for 56/70 against 48/80 (his paper's example)")
    func intervals() throws {
        let wilson = try #require(TimingStatistics.wilson(successes: 8, trials: 10))
        #expect(abs(wilson.lowerBound - 0.4902) < 0.0001 && abs(wilson.upperBound - 0.9433) < 0.0001, "\(wilson)")
        #expect(TimingStatistics.wilson(successes: 0, trials: 0) == nil)
        let week = TimingWeek(
            weekStart: LocalDate(dayNumber: 0),
            learned: arm(deliveries: 70, reads: [3: 56]),
            holdout: arm(deliveries: 80, reads: [3: 48])
        )
        #expect(abs((week.readRateDifference ?? 0) - 0.2) < 1e-9)
        let difference = try #require(week.readRateDifferenceInterval)
        #expect(abs(difference.lowerBound - 0.0524) < 0.0001 && abs(difference.upperBound - 0.3339) < 0.0001)
        // Without a holdout there is nothing to compare.
        #expect(
            TimingWeek(weekStart: week.weekStart, learned: week.learned, holdout: TimingArmCounts()).readRateDifference
                == nil
        )
    }

    @Test("The median to read and its interval come off the buckets; the interval narrows with more reads")
    func median() throws {
        // 100 reads spread evenly over the 15-30 minute bucket (index 3): the median is its middle.
        let few = arm(deliveries: 100, reads: [3: 100])
        #expect(abs((few.medianSecondsToRead ?? 0) - 1_350) < 1e-9)
        let interval = try #require(few.medianInterval)
        #expect(interval.contains(1_350) && interval.lowerBound > 900 && interval.upperBound < 1_800, "\(interval)")
        let many = arm(deliveries: 10_000, reads: [3: 10_000])
        let narrower = try #require(many.medianInterval)
        #expect(narrower.upperBound - narrower.lowerBound < interval.upperBound - interval.lowerBound)
        #expect(arm(deliveries: 5, reads: [:]).medianInterval == nil)
    }

    @Test("Days sum into Monday-first weeks of the range; days outside it and weeks without deliveries are left out")
    func weeks() throws {
        var days: [String: TimingDayCounts] = [:]
        for (day, arm, bucket) in [
            ("2026-11-22", 0, 2), ("2026-11-23", 0, -1), ("2026-11-23", 1, 4), ("2026-11-29", 1, -1),
            ("2026-11-30", 0, 1), ("2026-12-20", 0, 1),
        ] {
            days[day, default: TimingDayCounts()].add(arm: arm, bucket: bucket, count: 1)
        }
        let range = try ReportRange(from: "2026-11-23", to: "2026-12-06", today: LocalDate(parsing: "2026-12-06"))
        let weeks = TimingWeek.weeks(days, range: range)
        #expect(weeks.map(\.weekStart.description) == ["2026-11-23", "2026-11-30"])
        #expect(weeks[0].learned.deliveries == 1 && weeks[0].learned.read == 0)
        #expect(weeks[0].holdout.deliveries == 2 && weeks[0].holdout.read == 1)
        #expect(weeks[1].learned.deliveries == 1 && weeks[1].learned.read == 1)
    }
}
