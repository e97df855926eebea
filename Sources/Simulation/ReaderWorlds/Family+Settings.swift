import Engine
import Foundation

extension Family {
    /// Edge: the best time lies beyond the ±3 hours a learned time may move, or in quiet hours, so the best allowed
    /// time is the window's edge or the end of quiet hours. Beyond-late: stated 06:30-09:00, reads 3h50-5h20 later
    /// (over lunch); beyond-early: stated 11:30-13:30, reads as long before (with the morning coffee);
    /// quiet-evening: stated 19:00-20:30, reads in bed at 22:00-23:00; quiet-morning: stated 07:00-08:30, reads at
    /// 05:45-06:30 before leaving. One strong habit (55-90% of days), rare glances.
    static func edgeReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let stated: LocalTime
        let center: Double
        switch role {
        case "beyond-late":
            stated = try halfHour(in: 6.5...9, &luck)
            center = Double(stated.minuteOfDay) * minute + luck.uniform(230...320) * minute
        case "beyond-early":
            stated = try halfHour(in: 11.5...13.5, &luck)
            center = Double(stated.minuteOfDay) * minute - luck.uniform(230...320) * minute
        case "quiet-evening":
            stated = try halfHour(in: 19...20.5, &luck)
            center = luck.uniform(22...23) * hour
        default:
            stated = try halfHour(in: 7...8.5, &luck)
            center = luck.uniform(5.75...6.5) * hour
        }
        let quiet = role.hasPrefix("quiet")
        let profile = DayProfile(
            habits: [
                ReadingHabit(
                    center: center,
                    spread: luck.uniform(quiet ? 20...40 : 15...35) * minute,
                    count: .once(chance: luck.uniform(0.55...0.9))
                )
            ],
            glances: Glances(from: 6.5 * hour, to: 23.5 * hour, perHour: luck.uniform(0.005...0.03)),
            offDay: luck.uniform(0.02...0.1)
        )
        return built(WorldReader(timeZone: "UTC", stated: stated, group: role), MomentReader(usual: profile))
    }

    /// Bimodal: two thirds read in the morning (06:30-09:00), a third in the evening (18:00-20:30), though all
    /// state a morning time (evening readers one at random: the default they never changed). Each takes the
    /// programme on only 2-3 days a week, so the broker sees few deliveries.
    static func bimodalReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let morning = role == "morning"
        let center = luck.uniform(morning ? 6.5...9 : 18...20.5) * hour
        let statedTime = morning ? try stated(near: center, &luck) : try halfHour(in: 6.5...10, &luck)
        var days = Array(1...6)
        luck.shuffle(&days)
        let weekdays = try Weekdays(Array(days.prefix(luck.chance(0.5) ? 2 : 3)))
        let reader = WorldReader(timeZone: "UTC", stated: statedTime, weekdays: weekdays, group: role)
        return built(reader, MomentReader(usual: habitProfile(center: center, &luck, evening: false)))
    }

    /// Zones: plain habitual readers (06:15-10:30) in six zones, their habits in local wall time, so a 07:45
    /// reader stays one across a change to or from summer time.
    static func zonesReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let center = luck.uniform(6.25...10.5) * hour
        let reader = WorldReader(timeZone: role, stated: try stated(near: center, &luck), group: role)
        return built(reader, MomentReader(usual: habitProfile(center: center, &luck)))
    }

    /// Mixed: plain habitual readers (70% in the morning, 06:15-10:30; 15% at midday; 15% in the evening), 15%
    /// who never read and 15% who did not opt in; 40% with their own quiet hours, 40% with their own weekdays.
    static func mixedReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let when = luck.uniform()
        let center = luck.uniform(when < 0.7 ? 6.25...10.5 : when < 0.85 ? 11.5...14 : 17.5...21.5) * hour
        var reader = WorldReader(timeZone: "UTC", stated: try stated(near: center, &luck, in: 6.5...20.5), group: role)
        if role == "own-quiet-hours" || role == "own-both" {
            let quiet = luck.pick([
                "22:00-06:00", "22:00-07:00", "23:00-07:00", "20:00-08:00", "22:30-06:30", "23:00-08:00", "21:30-07:30",
            ])
            reader.quietHours = try QuietHours(parsing: quiet)
        }
        if role == "own-weekdays" || role == "own-both" {
            var days = Array(1...7)
            luck.shuffle(&days)
            let choices = [
                [1, 2, 3, 4, 5], [1, 3, 5], [2, 4, 6], [1, 2, 3, 4], [6, 7], Array(days.prefix(luck.int(3...5))),
            ]
            reader.weekdays = try Weekdays(luck.pick(choices))
        }
        return built(reader, MomentReader(usual: habitProfile(center: center, &luck)))
    }

    /// Late-random: the chance of a read within the hour follows a peak (07:00-11:00; 35-80% above a waking base
    /// of 2-8%; narrow: 25-50 minutes wide, broad: 50-100), but a push not read within its hour is read, by 40-90%
    /// of them, at a uniformly random later time that day (clearing notifications whenever), not at the peak.
    static func lateRandomReader(_ role: String, _ luck: inout SplitMix64) throws -> BuiltReader {
        let center = luck.uniform(7...11) * hour
        let style = PeakReader(
            center: center,
            width: luck.uniform(role == "narrow-peak" ? 25...50 : 50...100) * minute,
            peak: luck.uniform(0.35...0.8),
            base: luck.uniform(0.02...0.08),
            awake: (6.5 * hour)...(23 * hour),
            lateChance: luck.uniform(0.4...0.9)
        )
        let reader = WorldReader(timeZone: "UTC", stated: try stated(near: center, &luck), group: role)
        return BuiltReader(reader: reader, style: .peak(style))
    }
}
