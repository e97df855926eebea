import Engine
import Foundation

/// How learned delivery times did in a ``ReaderWorld``: each delivery's push at the learned time is compared with
/// the same reader's same day at the stated time (fixed times) and at the oracle's time (the allowed time with the
/// best chance of a read within the hour, known from the world), on the same day's luck.
public struct WorldScore: Sendable, CustomStringConvertible {
    /// Reads within the hour of a push at the learned, the stated and the oracle's time, of `pushes` deliveries.
    public struct Tally: Sendable, Equatable {
        public var pushes = 0
        public var learned = 0
        public var fixed = 0
        public var oracle = 0

        public init() {}

        public var learnedAgainstOracle: Double { Double(learned) / Double(max(oracle, 1)) }
        public var learnedAgainstFixed: Double { Double(learned) / Double(max(fixed, 1)) }
        public var oracleAgainstFixed: Double { Double(oracle) / Double(max(fixed, 1)) }
        public func rate(_ reads: Int) -> Double { Double(reads) / Double(max(pushes, 1)) }

        mutating func add(learned: Bool, fixed: Bool, oracle: Bool) {
            pushes += 1
            if learned { self.learned += 1 }
            if fixed { self.fixed += 1 }
            if oracle { self.oracle += 1 }
        }

        /// `reads` against `others`, nil where `others` is none (never-readers: the oracle reads nothing either, and
        /// 0.000 "of the oracle" said the opposite of what happened).
        public static func ratio(_ reads: Int, _ others: Int) -> Double? {
            others > 0 ? Double(reads) / Double(others) : nil
        }

        public var summary: String {
            func text(_ ratio: Double?) -> String { ratio.map { String(format: "%.3f", $0) } ?? "-" }
            return String(format: "learned %.3f fixed %.3f oracle %.3f", rate(learned), rate(fixed), rate(oracle))
                + " (l/o \(text(Self.ratio(learned, oracle))), l/f \(text(Self.ratio(learned, fixed))),"
                + " o/f \(text(Self.ratio(oracle, fixed))); \(pushes) pushes)"
        }
    }

    public let family: String
    public let seed: UInt64
    /// Days 1-7 and days 22 to the end, every reader.
    public var early = Tally()
    public var late = Tally()
    /// Days 22 to the end, per group.
    public var groups: [String: Tally] = [:]
    /// Readers whose habit moved: from 14 days after the move to the end.
    public var afterMove = Tally()
    /// Days on which a reader who never read was pushed within 15 minutes of the stated time, of all their days.
    public var neverReaderDays = 0
    public var neverReaderDaysNearStated = 0
    /// Pushes outside what the guardrails allow: in quiet hours, outside the window, on a day not in the
    /// programme, and programme days without a delivery; all must be 0.
    public var quietPushes = 0
    public var outsideWindow = 0
    public var excludedDayPushes = 0
    public var missedDays = 0
    public var deliveries = 0
    /// The holdout comparison as the report would see it (days 22 on, whole weeks): each user's weeks.
    public var comparisonRows: [TimingUserWeek] = []
    /// The truth it estimates: the learned arm's users the model may move, days 22 on, learned against fixed times
    /// on the same days' luck.
    public var truth = Tally()

    public init(family: String, seed: UInt64) {
        self.family = family
        self.seed = seed
    }

    public var neverReadersNearStated: Double {
        neverReaderDays == 0 ? 1 : Double(neverReaderDaysNearStated) / Double(neverReaderDays)
    }

    public var guardrailViolations: Int { quietPushes + outsideWindow + excludedDayPushes + missedDays }

    public var description: String {
        var lines = [
            "\(family) seed \(seed): days 22-: \(late.summary)",
            "  days 1-7: \(early.summary)",
        ]
        for (group, tally) in groups.sorted(by: { $0.key < $1.key }) { lines.append("  \(group): \(tally.summary)") }
        if afterMove.pushes > 0 { lines.append("  14 days after a move on: \(afterMove.summary)") }
        if neverReaderDays > 0 {
            lines.append(String(format: "  never-readers near their stated time: %.3f", neverReadersNearStated))
        }
        lines.append(
            "  \(deliveries) deliveries; \(quietPushes) in quiet hours, \(outsideWindow) outside the window, "
                + "\(excludedDayPushes) on excluded days, \(missedDays) missed"
        )
        return lines.joined(separator: "\n")
    }
}

/// One reader of a world as the scorer and the simulations need them: zone, schedule, and the oracle's choices.
struct ScoredReader: Sendable {
    let index: Int
    let reader: WorldReader
    let zone: TimeZone
    let quietHours: QuietHours
    let programme: Weekdays
    let window: Int
    /// The times the model may choose on a day: as ``LearnedTiming``'s candidates (each half hour's start in the
    /// window, the stated minute in its own half hour, none in the quiet hours).
    let candidates: [LocalTime]

    init(_ index: Int, _ world: any ReaderWorld, window: Int) {
        self.index = index
        reader = world.readers[index]
        zone = TimeZone(identifier: reader.timeZone) ?? TimeZone(secondsFromGMT: 0)!
        let quietHours = reader.quietHours ?? world.tenantQuietHours
        self.quietHours = quietHours
        programme = reader.weekdays.meeting(world.tenantWeekdays)
        self.window = window
        let stated = reader.stated.minuteOfDay
        let statedSlot = stated / 30
        candidates = (0..<48).compactMap { slot in
            let minute = slot == statedSlot ? stated : slot * 30
            guard abs(minute - stated) <= window, let time = try? LocalTime(minuteOfDay: minute),
                !quietHours.contains(time)
            else { return nil }
            return time
        }
    }

    /// The instant a push for a wall time on a date goes out, as the scheduler resolves it: in the reader's zone
    /// (a time in a gap: the gap's end), a time in the quiet hours at their end.
    func instant(_ date: LocalDate, _ time: LocalTime) -> Date? {
        DailySchedule(timeZone: zone, deliveryTime: time, quietHours: quietHours).fireInstant(for: date)
    }

    /// Whether a push at `at` is read within the hour, on the world's luck (nil: no push, no read).
    func readWithinHour(_ world: any ReaderWorld, _ at: Date?) -> Bool {
        guard let at, let read = world.readTime(reader: index, pushedAt: at) else { return false }
        return read.timeIntervalSince(at) <= 3600
    }

    /// The oracle's instant on a date: the allowed time with the best chance of a read within the hour.
    func oracle(_ world: any ReaderWorld, _ date: LocalDate) -> Date? {
        var best: (Date, Double)?
        for time in candidates {
            guard let at = instant(date, time) else { continue }
            let chance = world.chanceWithinHour(reader: index, pushedAt: at)
            if best.map({ chance > $0.1 }) ?? true { best = (at, chance) }
        }
        return best?.0
    }
}

extension WorldScore {
    /// Scores one delivery of reader `scored` on the world's day `day` (0-based), pushed at `pushedAt`.
    mutating func score(
        _ world: any ReaderWorld,
        _ scored: ScoredReader,
        day: Int,
        date: LocalDate,
        pushedAt: Date,
        neverReads: Bool,
        learnedArm: Bool = true
    ) {
        deliveries += 1
        func withinHour(_ at: Date?) -> Bool { scored.readWithinHour(world, at) }
        let wall = UserTiming.wall(pushedAt, in: scored.zone)
        if scored.quietHours.contains(wall.time) { quietPushes += 1 }
        if !scored.programme.contains(date.isoWeekday) { excludedDayPushes += 1 }
        // Outside the window, unless the quiet hours deferred it to their end (they win over the window).
        if abs(wall.time.minuteOfDay - scored.reader.stated.minuteOfDay) > scored.window,
            wall.time != scored.quietHours.end
        {
            outsideWindow += 1
        }
        let fixedAt = scored.instant(date, scored.reader.stated)
        if neverReads {
            neverReaderDays += 1
            if let fixedAt, abs(pushedAt.timeIntervalSince(fixedAt)) <= 15 * 60 { neverReaderDaysNearStated += 1 }
        }
        let outcome = (
            learned: withinHour(pushedAt), fixed: withinHour(fixedAt), oracle: withinHour(scored.oracle(world, date))
        )
        if day < 7 { early.add(learned: outcome.learned, fixed: outcome.fixed, oracle: outcome.oracle) }
        if day >= 21, learnedArm, scored.reader.optedIn {
            truth.add(learned: outcome.learned, fixed: outcome.fixed, oracle: outcome.oracle)
        }
        if day >= 21 {
            late.add(learned: outcome.learned, fixed: outcome.fixed, oracle: outcome.oracle)
            groups[scored.reader.group, default: Tally()].add(
                learned: outcome.learned,
                fixed: outcome.fixed,
                oracle: outcome.oracle
            )
        }
        if let moved = scored.reader.habitMovesOnDay, day >= moved + 14 {
            afterMove.add(learned: outcome.learned, fixed: outcome.fixed, oracle: outcome.oracle)
        }
    }
}
