import Engine
import Foundation

/// A reader world built by ``ReaderWorlds/make(family:seed:readers:)``: its population, and each reader's style.
///
/// The day's luck is a ``SplitMix64`` keyed by the seed, the reader and the local date, so a push at any time of
/// that day meets the same reading moments (or the same draws of a peak reader).
struct FamilyWorld: ReaderWorld {
    let family: String
    let seed: UInt64
    let start: Date
    let tenantQuietHours: QuietHours
    let tenantWeekdays: Weekdays
    let readers: [WorldReader]
    let styles: [ReadingStyle]
    let clocks: [ZoneClock]
    /// Each reader's clock, an index into `clocks`.
    let clockOfReader: [Int]
    /// The world's first local date (day 0).
    let firstDay: Int

    init(
        family: String,
        seed: UInt64,
        start: Date,
        tenantQuietHours: QuietHours,
        tenantWeekdays: Weekdays,
        population: [BuiltReader]
    ) {
        self.family = family
        self.seed = seed
        self.start = start
        self.tenantQuietHours = tenantQuietHours
        self.tenantWeekdays = tenantWeekdays
        readers = population.map(\.reader)
        styles = population.map(\.style)
        var zones: [String] = []
        var clocks: [ZoneClock] = []
        clockOfReader = readers.map { reader in
            if let index = zones.firstIndex(of: reader.timeZone) { return index }
            zones.append(reader.timeZone)
            clocks.append(ZoneClock(identifier: reader.timeZone, around: start.timeIntervalSince1970))
            return clocks.count - 1
        }
        self.clocks = clocks
        firstDay = LocalDate(instant: start.timeIntervalSince1970, offsetSeconds: 0).dayNumber
    }

    func luck(reader: Int, date: LocalDate) -> SplitMix64 {
        SplitMix64(keys: LuckTag.day, seed, UInt64(reader), UInt64(bitPattern: Int64(date.dayNumber)))
    }

    func readTime(reader: Int, pushedAt: Date) -> Date? {
        guard readers.indices.contains(reader) else { return nil }
        let clock = clocks[clockOfReader[reader]]
        let pushed = pushedAt.timeIntervalSince1970
        let (date, wall) = clock.local(pushed)
        switch styles[reader] {
        case .never:
            return nil
        case .moments(let style):
            for ahead in 0...2 {
                let day = date.adding(days: ahead)
                var luck = luck(reader: reader, date: day)
                for moment in style.profile(on: day, day: day.dayNumber - firstDay).moments(&luck) {
                    let read = clock.instant(day, moment)
                    guard read >= pushed else { continue }
                    return read - pushed <= style.horizon ? Date(timeIntervalSince1970: read) : nil
                }
            }
            return nil
        case .peak(let style):
            var luck = luck(reader: reader, date: date)
            let within = luck.uniform()
            let delay = luck.uniform()
            let late = luck.uniform()
            let when = luck.uniform()
            // Within the hour: mostly soon (the square skews the delay towards the push).
            if within < style.chance(at: wall) { return Date(timeIntervalSince1970: pushed + 3600 * delay * delay) }
            guard late < style.lateChance else { return nil }
            // Later that day, uniformly; past midnight only when less than half an hour of the day is left.
            let rest = max(1800, clock.instant(date.adding(days: 1), 0) - pushed - 3601)
            return Date(timeIntervalSince1970: pushed + 3601 + when * rest)
        }
    }

    func chanceWithinHour(reader: Int, pushedAt: Date) -> Double {
        guard readers.indices.contains(reader) else { return 0 }
        let clock = clocks[clockOfReader[reader]]
        let pushed = pushedAt.timeIntervalSince1970
        let (date, wall) = clock.local(pushed)
        switch styles[reader] {
        case .never:
            return 0
        case .peak(let style):
            return style.chance(at: wall)
        case .moments(let style):
            // The hour in wall-clock seconds from the push's midnight: longer or shorter across a change of offset.
            let end = max(wall, clock.wall(of: pushed + 3600, from: date))
            let day = date.dayNumber - firstDay
            var none = style.profile(on: date, day: day).chanceOfNone(from: wall, to: min(end, 86_400))
            if end > 86_400 {
                let next = date.adding(days: 1)
                none *= style.profile(on: next, day: day + 1).chanceOfNone(from: 0, to: end - 86_400)
            }
            return 1 - none
        }
    }
}
