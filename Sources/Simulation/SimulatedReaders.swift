import Engine
import Foundation

/// Simulated subscribers with latent reading habits, for proving the learned delivery time before a tenant turns it
/// on (issue 36). Deterministic for a seed.
///
/// Most users have a habit: a time of day they read at (within three hours of their stated delivery time), a peak
/// chance of reading a push that comes then, a width, and a chance that remains far from it; on weekends the habit
/// shifts later. Some have no habit at all (the same modest chance all day). Every day adds noise: the peak moves
/// by up to 20 minutes and the chances scale by 0.85-1.15. A push not read within its hour may still be read later
/// that day: at the habit's time, by a user who has one and has not passed it yet.
public struct SimulatedReaders: Sendable {
    public struct Reader: Sendable {
        public var user: UserID
        public var stated: LocalTime
        /// Minutes of the local day at which the habit peaks, weekdays and weekends (nil: no habit).
        public var peak: [Int]?
        public var width: Double
        public var peakChance: Double
        public var baseChance: Double

        /// The chance that a push at `minute` on a day of `kind` is read within the hour, with the day's noise.
        public func chance(at minute: Int, _ kind: DayKind, shift: Double = 0, scale: Double = 1) -> Double {
            guard let peak else { return min(1, baseChance * scale) }
            let distance = Double(minute) - (Double(peak[kind.rawValue]) + shift)
            let curve = exp(-distance * distance / (2 * width * width))
            return min(1, max(0, (baseChance + (peakChance - baseChance) * curve) * scale))
        }
    }

    public let readers: [Reader]
    public let quietHours: QuietHours
    let seed: UInt64

    /// `count` readers; stated times 07:00-09:00 on the half hour; quiet hours 21:00-07:00; 15% without a habit.
    public init(count: Int, seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        self.seed = seed
        quietHours = try QuietHours(parsing: "21:00-07:00")
        readers = try (1...count).map { n in
            let stated = try LocalTime(minuteOfDay: 7 * 60 + 30 * Int(generator.unit() * 5))
            let habit = generator.unit() >= 0.15
            // The habit's peak: up to 150 minutes either side of the stated time, and not in the quiet hours.
            let offset = Int((generator.unit() * 2 - 1) * 150)
            let weekday = min(max(stated.minuteOfDay + offset, 7 * 60), 20 * 60 + 30)
            let weekend = min(weekday + 60 + Int(generator.unit() * 60), 20 * 60 + 30)
            return Reader(
                user: UserID(Int64(n)),
                stated: stated,
                peak: habit ? [weekday, weekend] : nil,
                width: 35 + generator.unit() * 45,
                peakChance: 0.55 + generator.unit() * 0.35,
                baseChance: habit ? 0.06 + generator.unit() * 0.12 : 0.2 + generator.unit() * 0.2
            )
        }
    }

    /// A reader's day: the peak's shift in minutes, the chances' scale, and the uniform numbers that decide a read
    /// within the hour, how long it takes, and a later read (the same for every arm: they meet the same luck).
    public struct Day: Sendable {
        public var shift: Double
        public var scale: Double
        public var luck: Double
        public var delay: Double
        public var lateLuck: Double
    }

    public func day(_ reader: Reader, _ day: Int) -> Day {
        var generator = SeededGenerator(seed: seed ^ stableHash("noise", reader.user.description, String(day)))
        return Day(
            shift: (generator.unit() * 2 - 1) * 20,
            scale: 0.85 + generator.unit() * 0.3,
            luck: generator.unit(),
            delay: generator.unit(),
            lateLuck: generator.unit()
        )
    }

    /// Whether a push at `minute` is read within the hour.
    public func readsWithinHour(_ reader: Reader, at minute: Int, _ kind: DayKind, _ day: Day) -> Bool {
        day.luck < reader.chance(at: minute, kind, shift: day.shift, scale: day.scale)
    }

    /// When a push at `minute` is read, if it is that day (nil: not read).
    public func readAt(_ reader: Reader, pushedAt minute: Int, _ kind: DayKind, _ day: Day) -> LocalTime? {
        if readsWithinHour(reader, at: minute, kind, day) {
            return try? LocalTime(minuteOfDay: min(minute + Int(day.delay * 60), 1439))
        }
        // Later that day: at the habit's time, when it is still to come.
        guard let peak = reader.peak else { return nil }
        let at = Int(Double(peak[kind.rawValue]) + day.shift + (day.delay - 0.5) * 30)
        guard at > minute + 60, at < 1440, day.lateLuck < reader.peakChance * day.scale * 0.8 else { return nil }
        return try? LocalTime(minuteOfDay: at)
    }

    /// The best minute an oracle could choose for a reader on a day kind: the half hour (or the stated minute) in the
    /// window of `windowMinutes` and outside the quiet hours with the highest chance, without the day's noise.
    public func oracle(_ reader: Reader, _ kind: DayKind, windowMinutes: Int) -> Int {
        let stated = reader.stated.minuteOfDay
        let minutes = [stated] + (0..<48).map { $0 * 30 }.filter { abs($0 - stated) <= windowMinutes }
        return minutes.filter { minute in
            (try? LocalTime(minuteOfDay: minute)).map { !quietHours.contains($0) } ?? false
        }
        .max { reader.chance(at: $0, kind) < reader.chance(at: $1, kind) } ?? stated
    }
}

/// ``SimulatedReaders`` as a ``ReaderWorld`` (family "original"): the world the first model was tuned in, in UTC
/// from Monday 2026-01-05, quiet hours 21:00-07:00, no Sundays; everyone opted in.
public struct OriginalReaderWorld: ReaderWorld {
    public let family = "original"
    public let seed: UInt64
    public let start = TimingSimulation.start
    public let tenantQuietHours: QuietHours
    public let tenantWeekdays: Weekdays
    public let readers: [WorldReader]
    let world: SimulatedReaders

    public init(count: Int, seed: UInt64) throws {
        world = try SimulatedReaders(count: count, seed: seed)
        self.seed = seed
        tenantQuietHours = world.quietHours
        tenantWeekdays = try Weekdays([1, 2, 3, 4, 5, 6])
        readers = world.readers.map {
            WorldReader(timeZone: "UTC", stated: $0.stated, group: $0.peak == nil ? "no-habit" : "habit")
        }
    }

    func moment(_ at: Date) -> (day: Int, minute: Int, kind: DayKind) {
        let seconds = Int(at.timeIntervalSince(start))
        let day = seconds / 86_400
        let date = LocalDate(dayNumber: Int(start.timeIntervalSince1970) / 86_400 + day)
        return (day, (seconds % 86_400) / 60, DayKind(isoWeekday: date.isoWeekday))
    }

    public func readTime(reader: Int, pushedAt: Date) -> Date? {
        let (day, minute, kind) = moment(pushedAt)
        let one = world.readers[reader]
        guard let read = world.readAt(one, pushedAt: minute, kind, world.day(one, day)) else { return nil }
        return start.addingTimeInterval(Double(day * 86_400 + read.minuteOfDay * 60 + 30))
    }

    public func chanceWithinHour(reader: Int, pushedAt: Date) -> Double {
        let (_, minute, kind) = moment(pushedAt)
        return world.readers[reader].chance(at: minute, kind)
    }
}
