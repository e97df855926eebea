import Engine
import Foundation

extension Family {
    /// Session: people open the app a few times a day, and a waiting push is read at the next opening. One to three
    /// habitual openings (the first near the stated time, 06:15-10:15; others at lunch, mid-afternoon or in the
    /// evening; each on 50-95% of days, spread 5-30 minutes), random openings while awake (0.1-0.6 an hour, from
    /// 06:00-07:30 to 22:00-23:54), up to 5% of days without the app; a push unread after two days is never read.
    static func sessionReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let count = role == "one-habit" ? 1 : role == "two-habits" ? 2 : 3
        let first = luck.uniform(6.25...10.25) * hour
        var habits = [
            ReadingHabit(
                center: first,
                spread: luck.uniform(5...30) * minute,
                count: .once(chance: luck.uniform(0.6...0.95))
            )
        ]
        var slots: [ClosedRange<Double>] = [11.75...13.5, 15...17, 18.5...22.5]
        luck.shuffle(&slots)
        for slot in slots.prefix(count - 1) {
            habits.append(
                ReadingHabit(
                    center: luck.uniform(slot) * hour,
                    spread: luck.uniform(5...30) * minute,
                    count: .once(chance: luck.uniform(0.5...0.9))
                )
            )
        }
        let profile = DayProfile(
            habits: habits,
            glances: Glances(
                from: luck.uniform(6...7.5) * hour,
                to: luck.uniform(22...23.9) * hour,
                perHour: luck.uniform(0.1...0.6)
            ),
            offDay: luck.uniform(0...0.05)
        )
        let reader = WorldReader(timeZone: "UTC", stated: try stated(near: first, &luck), group: role)
        return built(reader, MomentReader(usual: profile, horizon: 48 * hour))
    }

    /// Weekend: a weekday habit (06:15-10:30) and a Saturday and Sunday one 1-4 hours later (a lie-in, a brunch
    /// read) or earlier (early sport, small children), looser (spread up to 1.5 times) and a little weaker.
    static func weekendReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let later = role == "weekend-later"
        let weekday = luck.uniform(later ? 6.25...10.5 : 7.25...10.5) * hour
        // Earlier weekends stay at 06:00 or after.
        let shift = luck.uniform(1...(later ? 4 : min(4, weekday / hour - 6))) * hour
        let usual = habitProfile(center: weekday, &luck)
        let weekend = usual.withMainHabit(
            at: later ? weekday + shift : weekday - shift,
            spreadBy: luck.uniform(1...1.5),
            chanceBy: luck.uniform(0.8...1)
        )
        let reader = WorldReader(timeZone: "UTC", stated: try stated(near: weekday, &luck), group: role)
        return built(reader, MomentReader(usual: usual, weekend: weekend))
    }

    /// Moving: a habit that moves 1-3 hours earlier or later on a day between 15 and 30 (a new job, a school
    /// term, a new baby) and stays there; a third keep theirs.
    static func movingReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let before: Double
        var after: Double?
        switch role {
        case "moves-earlier":
            before = luck.uniform(7.5...10.5) * hour
            after = before - luck.uniform(1...min(3, before / hour - 6)) * hour
        case "moves-later":
            before = luck.uniform(6.25...10) * hour
            after = before + luck.uniform(1...3) * hour
        default:
            before = luck.uniform(6.25...10.5) * hour
        }
        let usual = habitProfile(center: before, &luck)
        let day = luck.int(15...30)
        var reader = WorldReader(timeZone: "UTC", stated: try stated(near: before, &luck), group: role)
        var reading = MomentReader(usual: usual)
        if let after {
            reader.habitMovesOnDay = day
            reading.moved = usual.withMainHabit(at: after)
            reading.moveDay = day
        }
        return built(reader, reading)
    }

    /// Low and noisy: readers who seldom open the push (15-30% within the hour at the best time): on each day the
    /// habit (07:30-10:30) shifts by one of seven steps up to ±15-45 minutes and is weak, usual or strong (0.4,
    /// 1, 1.6 times), and they read at a Poisson number of moments around it (spread 25-50 minutes); 5-25% of days
    /// without reading, a rare glance otherwise; a push unread for a day is never read.
    static func lowNoisyReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let target = luck.uniform(role == "very-low" ? 0.16...0.21 : 0.22...0.28)
        let center = luck.uniform(7.5...10.5) * hour
        let jitter = luck.uniform(15...45) * minute
        let profile = DayProfile(
            habits: [ReadingHabit(center: center, spread: luck.uniform(25...50) * minute, count: .cluster(mean: 1))],
            glances: Glances(from: 7 * hour, to: 23 * hour, perHour: luck.uniform(0.002...0.01)),
            shifts: (-3...3).map { Double($0) / 3 * jitter },
            strengths: [0.4, 1, 1.6],
            offDay: luck.uniform(0.05...0.25)
        )
        let reader = WorldReader(timeZone: "UTC", stated: try stated(near: center, &luck), group: role)
        return built(reader, MomentReader(usual: calibrated(profile, best: target), horizon: 24 * hour))
    }

    /// The profile with its cluster's mean set (by bisection) so that the best chance within the hour, searched
    /// every ten minutes around the habit, is `best`.
    private static func calibrated(_ profile: DayProfile, best target: Double) -> DayProfile {
        let center = profile.habits[0].center
        func best(_ mean: Double) -> Double {
            var candidate = profile
            candidate.habits[0].count = .cluster(mean: mean)
            return stride(from: center - 80 * minute, through: center + 20 * minute, by: 10 * minute)
                .map { candidate.chanceWithinHour(from: $0) }.max() ?? 0
        }
        var low = 0.0
        var high = 40.0
        for _ in 0..<24 {
            let middle = (low + high) / 2
            if best(middle) < target { low = middle } else { high = middle }
        }
        var result = profile
        result.habits[0].count = .cluster(mean: (low + high) / 2)
        return result
    }
}
