import Engine
import Foundation

/// A yardstick for issue 45's "learned/oracle ≥ 0.85" that no delivery time can be: a learner shown, for every past
/// day, whether a push at *each* allowed time would have been read within the hour. A real push goes out at one
/// time and shows what happened at that one (and, by its read's time, a little of the others); this learner sees
/// them all, every day, on the same luck the scorer uses, and on each day from day 22 on takes the allowed time that
/// did best so far (a user who did not opt in keeps their stated time, as with the model). How it weighs the past
/// is a ``Variant`` (fading, smoothing over neighbouring half hours); the runs try several and the best of them in
/// hindsight is the yardstick, which favours it further.
///
/// It is not a proven bound (a learner that knew the world's generator could guess better from less), but where
/// this learner stays well below 0.85 of the oracle, the ratio asks for more than the reads can tell any learner
/// that must find each reader's habit from their reads.
public struct FullInformationReference: Sendable {
    /// How the learner weighs what it saw.
    public struct Variant: Sendable, Hashable, CustomStringConvertible {
        /// After how many days a day's outcome counts half; nil: never fades.
        public var halfLifeDays: Double?
        /// Outcomes of neighbouring half hours count with a Gaussian's weight of this sigma; 0: none.
        public var smoothingMinutes: Double

        public init(halfLifeDays: Double?, smoothingMinutes: Double) {
            self.halfLifeDays = halfLifeDays
            self.smoothingMinutes = smoothingMinutes
        }

        public var description: String {
            "half life \(halfLifeDays.map { "\(Int($0)) d" } ?? "none"), smoothing \(Int(smoothingMinutes)) min"
        }
    }

    public static let variants: [Variant] = [nil, 21.0, 7.0, 3.0].flatMap { halfLife in
        [0.0, 30.0].map { Variant(halfLifeDays: halfLife, smoothingMinutes: $0) }
    }

    public let days: Int
    public let window: Int
    public let variants: [Variant]

    public init(days: Int = 60, window: Int = LearnedTiming().windowMinutes, variants: [Variant] = Self.variants) {
        self.days = days
        self.window = window
        self.variants = variants
    }

    /// Per variant, in the order given: the tallies of days 22 on (all readers, per group, and from 14 days after a
    /// habit moved), with the reference's reads where ``WorldScore`` has the learned time's.
    public struct Result: Sendable {
        public var variant: Variant
        public var late = WorldScore.Tally()
        public var groups: [String: WorldScore.Tally] = [:]
        public var afterMove = WorldScore.Tally()
    }

    public func run(_ world: any ReaderWorld) -> [Result] {
        var results = variants.map { Result(variant: $0) }
        let firstDay = Int(world.start.timeIntervalSince1970) / 86_400
        for index in world.readers.indices {
            let scored = ScoredReader(index, world, window: window)
            let rows = outcomes(world, scored, firstDay: firstDay)
            for (position, variant) in variants.enumerated() {
                Self.follow(rows, scored, variant, into: &results[position])
            }
        }
        return results
    }

    /// One programme day of one reader: whether a push at each candidate time, at the stated time and at the
    /// oracle's time was read within the hour.
    struct Row {
        var day: Int
        var kind: DayKind
        var candidates: [Bool]
        var fixed: Bool
        var oracle: Bool
    }

    func outcomes(_ world: any ReaderWorld, _ scored: ScoredReader, firstDay: Int) -> [Row] {
        func withinHour(_ at: Date?) -> Bool { scored.readWithinHour(world, at) }
        var rows: [Row] = []
        for day in 0..<days {
            let date = LocalDate(dayNumber: firstDay + day)
            guard scored.programme.contains(date.isoWeekday) else { continue }
            var candidates = [Bool](repeating: false, count: scored.candidates.count)
            for position in 0..<scored.candidates.count {
                candidates[position] = withinHour(scored.instant(date, scored.candidates[position]))
            }
            rows.append(
                Row(
                    day: day,
                    kind: DayKind(isoWeekday: date.isoWeekday),
                    candidates: candidates,
                    fixed: withinHour(scored.instant(date, scored.reader.stated)),
                    oracle: withinHour(scored.oracle(world, date))
                )
            )
        }
        return rows
    }

    /// The learner over one reader's days: before each day it takes the candidate with the most (faded, smoothed)
    /// reads so far on days of the same kind (of both kinds until it has seen four of the day's kind, as the model
    /// does), the one nearest the stated time among equals; then it sees that day's row whole.
    static func follow(_ rows: [Row], _ scored: ScoredReader, _ variant: Variant, into result: inout Result) {
        let count = scored.candidates.count
        guard count > 0 else { return }
        let minutes = scored.candidates.map(\.minuteOfDay)
        let stated = scored.reader.stated.minuteOfDay
        let kernel: [[Double]] = minutes.map { from in
            minutes.map { to in
                guard variant.smoothingMinutes > 0 else { return from == to ? 1 : 0 }
                let distance = Double(from - to) / variant.smoothingMinutes
                return exp(-distance * distance / 2)
            }
        }
        // Per day kind: the faded reads per candidate, as of `asOf`, and how many days were seen.
        var sums = [[Double]](repeating: [Double](repeating: 0, count: count), count: DayKind.allCases.count)
        var seen = [Int](repeating: 0, count: DayKind.allCases.count)
        var asOf = 0
        for row in rows {
            if let halfLife = variant.halfLifeDays, row.day > asOf {
                let fade = pow(0.5, Double(row.day - asOf) / halfLife)
                for kind in 0..<sums.count {
                    for position in 0..<count { sums[kind][position] *= fade }
                }
            }
            asOf = row.day
            if row.day >= 21 {
                let kind = row.kind.rawValue
                var reads = sums[kind]
                if seen[kind] < 4 {
                    for other in 0..<sums.count where other != kind {
                        for position in 0..<count { reads[position] += sums[other][position] }
                    }
                }
                var best = 0
                var bestScore = -1.0
                for position in 0..<count {
                    var score = 0.0
                    for other in 0..<count { score += kernel[position][other] * reads[other] }
                    let nearer = abs(minutes[position] - stated) < abs(minutes[best] - stated)
                    if score > bestScore + 1e-9 || (abs(score - bestScore) <= 1e-9 && nearer) {
                        (best, bestScore) = (position, score)
                    }
                }
                // Held to the rules the model is held to: a user who set their time and did not opt in keeps it.
                let read = scored.reader.optedIn ? row.candidates[best] : row.fixed
                result.late.add(learned: read, fixed: row.fixed, oracle: row.oracle)
                result.groups[scored.reader.group, default: WorldScore.Tally()].add(
                    learned: read,
                    fixed: row.fixed,
                    oracle: row.oracle
                )
                if let moved = scored.reader.habitMovesOnDay, row.day >= moved + 14 {
                    result.afterMove.add(learned: read, fixed: row.fixed, oracle: row.oracle)
                }
            }
            for position in 0..<count where row.candidates[position] { sums[row.kind.rawValue][position] += 1 }
            seen[row.kind.rawValue] += 1
        }
    }
}
