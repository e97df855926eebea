import Foundation
import Testing

@testable import Engine

/// The holdout comparison's statistics (users as the unit), its weeks, and the safety valve's rule (issue 45).
@Suite("Learned times against the holdout")
struct TimingComparisonTests {
    func arm(deliveries: Int, reads: [Int: Int]) -> TimingArmCounts {
        var counts = TimingArmCounts()
        counts.add(bucket: -1, count: deliveries - reads.values.reduce(0, +))
        for (bucket, count) in reads { counts.add(bucket: bucket, count: count) }
        return counts
    }

    /// Rows of one week: `(deliveries, within the hour)` per user, read at all = within the hour.
    func rows(
        _ learned: [(Int, Int)],
        _ holdout: [(Int, Int)],
        week: LocalDate = LocalDate(dayNumber: 4)
    ) -> [TimingUserWeek] {
        learned.enumerated().map { index, user in
            TimingUserWeek(
                user: UserID(Int64(index + 1)),
                week: week,
                holdout: false,
                deliveries: user.0,
                withinHour: user.1,
                read: user.1
            )
        }
            + holdout.enumerated().map { index, user in
                TimingUserWeek(
                    user: UserID(Int64(1000 + index)),
                    week: week,
                    holdout: true,
                    deliveries: user.0,
                    withinHour: user.1,
                    read: user.1
                )
            }
    }

    @Test("The difference's interval is the cluster-robust one, worked by hand")
    func byHand() throws {
        // Learned: 8, 6 and 4 of 10 (0.6; residuals 2, 0, -2); holdout: 5, 5 and 2 of 10 (0.4; residuals 1, 1, -2).
        // Variances 3/2 * 8/900 and 3/2 * 6/900; the half width 1.96 * sqrt(14/600) = 0.29940.
        let comparison = TimingArmComparison(rows([(10, 8), (10, 6), (10, 4)], [(10, 5), (10, 5), (10, 2)]))
        let difference = try #require(comparison.withinHour)
        #expect(abs(difference.estimate - 0.2) < 1e-9)
        #expect(abs(difference.low - (0.2 - 0.29940)) < 1e-4 && abs(difference.high - (0.2 + 0.29940)) < 1e-4)
        #expect(!difference.significant)
        #expect(
            comparison.learned.users == 3 && comparison.learned.deliveries == 30 && comparison.learned.withinHour == 18
        )
        // One user in an arm: no interval.
        #expect(TimingArmComparison(rows([(10, 8)], [(10, 5), (10, 2)])).withinHour == nil)
        // A user's weeks add up to one cluster.
        let split = rows([(5, 4), (5, 4)], []).map { row -> TimingUserWeek in
            var row = row
            row.user = UserID(1)
            return row
        }
        #expect(TimingArmComparison(split).learned.users == 1)
    }

    @Test("Readers who read always or never widen the interval that deliveries taken as independent would not")
    func clustered() throws {
        // The same totals (60 of 100 against 40 of 100): spread about evenly over users, or each user all or nothing.
        let even = TimingArmComparison(
            rows(
                Array(repeating: [(10, 5), (10, 7)], count: 5).flatMap { $0 },
                Array(repeating: [(10, 3), (10, 5)], count: 5).flatMap { $0 }
            )
        )
        let lumpy = TimingArmComparison(
            rows(
                Array(repeating: (10, 10), count: 6) + Array(repeating: (10, 0), count: 4),
                Array(repeating: (10, 10), count: 4) + Array(repeating: (10, 0), count: 6)
            )
        )
        let narrow = try #require(even.withinHour)
        let wide = try #require(lumpy.withinHour)
        #expect(narrow.estimate == wide.estimate)
        #expect(narrow.significant && !wide.significant, "\(narrow) \(wide)")
        #expect(wide.high - wide.low > 4 * (narrow.high - narrow.low))
    }

    @Test(
        "Without an effect, the interval leaves 0 out about 5% of the time; deliveries taken as independent, far more"
    )
    func coverage() throws {
        // 400 experiments of 60 users per arm, 10 deliveries each, each user's rate from Beta(2, 3) (mean 0.4): the
        // arms differ only by chance.
        var generator = SeededGenerator(seed: 45)
        var robustMisses = 0
        var naiveMisses = 0
        for _ in 0..<400 {
            func arm() -> [(Int, Int)] {
                (0..<60).map { _ in
                    let rate = generator.beta(2, 3)
                    return (10, (0..<10).filter { _ in generator.unit() < rate }.count)
                }
            }
            let (learned, holdout) = (arm(), arm())
            let difference = try #require(TimingArmComparison(rows(learned, holdout)).withinHour)
            if difference.significant { robustMisses += 1 }
            // The binomial interval that treats every delivery as independent.
            let p1 = Double(learned.reduce(0) { $0 + $1.1 }) / 600
            let p2 = Double(holdout.reduce(0) { $0 + $1.1 }) / 600
            let half = 1.96 * (p1 * (1 - p1) / 600 + p2 * (1 - p2) / 600).squareRoot()
            if abs(p1 - p2) > half { naiveMisses += 1 }
        }
        #expect(robustMisses >= 8 && robustMisses <= 36, "\(robustMisses) of 400 left 0 out")
        #expect(naiveMisses > 2 * robustMisses, "independent deliveries: \(naiveMisses), users: \(robustMisses)")
    }

    @Test("The median to read comes off the buckets")
    func median() throws {
        // 100 reads spread evenly over the 15-30 minute bucket (index 3): the median is its middle.
        #expect(abs((arm(deliveries: 100, reads: [3: 100]).medianSecondsToRead ?? 0) - 1_350) < 1e-9)
        #expect(arm(deliveries: 5, reads: [:]).medianSecondsToRead == nil)
    }

    @Test("Days and users' weeks sum into Monday-first weeks; days outside the range and empty weeks are left out")
    func weeks() throws {
        var days: [String: TimingDayCounts] = [:]
        for (day, arm, bucket) in [
            ("2026-11-22", 0, 2), ("2026-11-23", 0, -1), ("2026-11-23", 1, 4), ("2026-11-29", 1, -1),
            ("2026-11-30", 0, 1), ("2026-12-20", 0, 1),
        ] {
            days[day, default: TimingDayCounts()].add(arm: arm, bucket: bucket, count: 1)
        }
        let range = try ReportRange(from: "2026-11-23", to: "2026-12-06", today: LocalDate(parsing: "2026-12-06"))
        let users = rows([(3, 2), (2, 0)], [(4, 1), (1, 1)], week: try LocalDate(parsing: "2026-11-30"))
        let weeks = TimingWeek.weeks(days, users: users, range: range)
        #expect(weeks.map(\.weekStart.description) == ["2026-11-23", "2026-11-30"])
        #expect(weeks[0].learned.deliveries == 1 && weeks[0].learned.read == 0)
        #expect(weeks[0].holdout.deliveries == 2 && weeks[0].holdout.read == 1)
        #expect(weeks[1].learned.deliveries == 1 && weeks[1].learned.read == 1)
        #expect(weeks[0].users.learned.users == 0)
        #expect(weeks[1].users.learned.deliveries == 5 && weeks[1].users.holdout.withinHour == 2)
        #expect(weeks[1].users.withinHour != nil)
    }

    @Test("The valve judges the two weeks before the current one, after a resume only from its next Monday")
    func valveWeeks() throws {
        let thursday = try LocalDate(parsing: "2026-12-03")
        let judged = try #require(LearnedTimingGuard.weeks(today: thursday, watchFrom: nil))
        #expect(judged.map(\.description) == ["2026-11-16", "2026-11-23"])
        let resumed = LearnedTimingGuard.watchFrom(resumedOn: thursday)
        #expect(resumed.description == "2026-12-07")
        #expect(LearnedTimingGuard.weeks(today: try LocalDate(parsing: "2026-12-20"), watchFrom: resumed) == nil)
        #expect(LearnedTimingGuard.weeks(today: try LocalDate(parsing: "2026-12-21"), watchFrom: resumed) != nil)
    }

    @Test("The valve falls back only when both weeks are significantly worse within the hour")
    func valveVerdict() throws {
        let first = try LocalDate(parsing: "2026-11-16")
        let second = try LocalDate(parsing: "2026-11-23")
        let today = try LocalDate(parsing: "2026-12-03")
        let worse = Array(repeating: (7, 1), count: 30)
        let fixed = Array(repeating: (7, 5), count: 30)
        let same = Array(repeating: (7, 5), count: 30)
        func weeks(_ a: [(Int, Int)], _ b: [(Int, Int)]) -> [TimingWeek] {
            TimingWeek.weeks(
                [:],
                users: rows(a, fixed, week: first) + rows(b, fixed, week: second),
                range: try! ReportRange(from: "2026-11-16", to: "2026-11-29", today: today)
            )
        }
        let fallback = try #require(
            LearnedTimingGuard.verdict(weeks(worse, worse), judged: [first, second], today: today)
        )
        #expect(fallback.since == today && fallback.weeks == [first, second])
        #expect(fallback.reason.contains("week of 2026-11-16") && fallback.reason.contains("pp"), "\(fallback.reason)")
        #expect(LearnedTimingGuard.verdict(weeks(worse, same), judged: [first, second], today: today) == nil)
        #expect(LearnedTimingGuard.verdict(weeks(same, worse), judged: [first, second], today: today) == nil)
        #expect(LearnedTimingGuard.verdict([], judged: [first, second], today: today) == nil)
    }
}
