import Foundation

/// A half hour of the local day, 0 (00:00-00:30) to 47 (23:30-24:00): the unit the delivery time is learned in.
public struct TimingSlot: Hashable, Sendable, Comparable, Codable {
    public static let count = 48
    public let index: Int

    public init(_ index: Int) {
        self.index = min(max(index, 0), Self.count - 1)
    }

    public init(containing time: LocalTime) {
        self.init(time.minuteOfDay / 30)
    }

    /// The slot's first minute.
    public var start: LocalTime { LocalTime(clampedMinuteOfDay: index * 30) }

    public static func < (lhs: TimingSlot, rhs: TimingSlot) -> Bool { lhs.index < rhs.index }
}

/// Weekdays and weekends are learned apart once a user has enough of each (people read at other times on a
/// Saturday).
public enum DayKind: Int, Sendable, CaseIterable, Codable {
    case weekday = 0
    case weekend = 1

    public init(isoWeekday: Int) {
        self = isoWeekday >= 6 ? .weekend : .weekday
    }
}

/// What a user's deliveries say about their reading: per day kind and slot, how many pushes were read within the
/// hour and how many were not. Counts, not probabilities: they are the Beta evidence the model adds to its prior.
public struct ReadEvidence: Sendable, Equatable, Codable {
    /// `[kind][slot]`: what pushes in a slot showed.
    public internal(set) var reads: [[Double]]
    public internal(set) var misses: [[Double]]
    /// `[kind][slot]`: what pushes elsewhere suggest of a slot (a read's time, the hours it did not come in). It
    /// counts less as the slot's own pushes accumulate, so that a reader whose late reads say little (read at a
    /// random moment, not at the next look) is judged by what pushes there showed.
    public internal(set) var inferredReads: [[Double]]
    public internal(set) var inferredMisses: [[Double]]

    public init() {
        reads = Array(repeating: Array(repeating: 0, count: TimingSlot.count), count: DayKind.allCases.count)
        misses = reads
        inferredReads = reads
        inferredMisses = reads
    }

    enum CodingKeys: String, CodingKey {
        case reads, misses, inferredReads, inferredMisses, deliveryCounts, readCount
    }

    /// Evidence stored before inferred counts were kept apart decodes with none.
    public init(from decoder: any Decoder) throws {
        self.init()
        let container = try decoder.container(keyedBy: CodingKeys.self)
        reads = try container.decode([[Double]].self, forKey: .reads)
        misses = try container.decode([[Double]].self, forKey: .misses)
        inferredReads = try container.decodeIfPresent([[Double]].self, forKey: .inferredReads) ?? inferredReads
        inferredMisses = try container.decodeIfPresent([[Double]].self, forKey: .inferredMisses) ?? inferredMisses
        deliveryCounts = try container.decodeIfPresent([Int].self, forKey: .deliveryCounts) ?? [0, 0]
        readCount = try container.decodeIfPresent(Int.self, forKey: .readCount) ?? 0
    }

    /// One delivery pushed in `slot` on a day of `kind`: read within the hour, or not.
    public mutating func observe(_ slot: TimingSlot, _ kind: DayKind, read: Bool) {
        deliveryCounts[kind.rawValue] += 1
        if read { readCount += 1 }
        tally(slot, kind, read: read, weight: 1)
    }

    /// What one delivery's push-to-read delay says. A read within the hour is a read in the slot it was pushed in.
    /// Otherwise it is a miss there, and the time to read is censored, not a choice of the reader's best moment: a
    /// read says the reader came back then, so the other slots whose hour holds it (a push there would have been read
    /// within its hour) get a read of `model.lateReadWeight`, and the slots after the push whose whole hour passed
    /// before the read a miss of `model.skippedWeight`; a push not read that day gives those misses to every later
    /// slot of the day.
    public mutating func observe(
        pushedAt pushed: LocalTime,
        readAt read: LocalTime?,
        _ kind: DayKind,
        model: LearnedTiming = LearnedTiming()
    ) {
        let slot = TimingSlot(containing: pushed)
        deliveryCounts[kind.rawValue] += 1
        if read != nil { readCount += 1 }
        let pushedMinute = pushed.minuteOfDay
        let back = read.map { $0.minuteOfDay } ?? 24 * 60 + 60
        let soon = back >= pushedMinute && back - pushedMinute <= 60
        tally(slot, kind, read: soon, weight: 1)
        guard back >= pushedMinute else { return }
        for later in (slot.index + 1)..<TimingSlot.count {
            let start = later * 30
            if start + 60 < back {
                if model.skippedWeight > 0 { inferredMisses[kind.rawValue][later] += model.skippedWeight }
            } else if start < back, model.lateReadWeight > 0 {
                inferredReads[kind.rawValue][later] += model.lateReadWeight
            }
        }
    }

    /// Old evidence fades: every count multiplied by `factor` (the fold does it by the days that passed).
    public mutating func fade(by factor: Double) {
        guard factor < 1 else { return }
        for kind in 0..<reads.count {
            for slot in 0..<TimingSlot.count {
                reads[kind][slot] *= factor
                misses[kind][slot] *= factor
                inferredReads[kind][slot] *= factor
                inferredMisses[kind][slot] *= factor
            }
        }
    }

    /// The faded weight of reads of both kinds, seen and inferred: how much reading there is to learn from.
    public var readWeight: Double { Self.total(reads) + Self.total(inferredReads) }

    /// The sum of every count, kind by kind and slot by slot (the order `joined().reduce(0, +)` adds in).
    static func total(_ counts: [[Double]]) -> Double {
        var sum = 0.0
        for row in counts {
            for index in 0..<row.count { sum += row[index] }
        }
        return sum
    }

    private static func add(_ values: inout [Double], _ other: [Double]) {
        for index in 0..<values.count { values[index] += other[index] }
    }

    /// The sum of `values`, first to last.
    static func sum(_ values: [Double]) -> Double {
        var sum = 0.0
        for index in 0..<values.count { sum += values[index] }
        return sum
    }

    private mutating func tally(_ slot: TimingSlot, _ kind: DayKind, read: Bool, weight: Double) {
        if read {
            reads[kind.rawValue][slot.index] += weight
        } else {
            misses[kind.rawValue][slot.index] += weight
        }
    }

    /// Deliveries observed, per day kind.
    public private(set) var deliveryCounts: [Int] = [0, 0]
    /// Deliveries read (within the hour or later).
    public private(set) var readCount = 0

    /// Deliveries observed on days of `kind` (nil: all).
    public func deliveries(_ kind: DayKind? = nil) -> Int {
        kind.map { deliveryCounts[$0.rawValue] } ?? deliveryCounts.reduce(0, +)
    }

    /// Reads observed (all kinds).
    public var totalReads: Int { readCount }

    /// The evidence of `kind` alone, or of both kinds together: `(reads, misses)` per slot.
    func counts(_ kind: DayKind?) -> (reads: [Double], misses: [Double]) {
        guard let kind else {
            var both = (reads: reads[0], misses: misses[0])
            for slot in 0..<TimingSlot.count {
                both.reads[slot] += reads[1][slot]
                both.misses[slot] += misses[1][slot]
            }
            return both
        }
        return (reads[kind.rawValue], misses[kind.rawValue])
    }

    /// The inferred counts of `kind` (nil: both kinds), each slot's weighed by `trust / (trust + its own pushes)`.
    func inferred(_ kind: DayKind?, trust: Double) -> (reads: [Double], misses: [Double]) {
        let kinds = kind.map { [$0.rawValue] } ?? [0, 1]
        var result = (
            reads: [Double](repeating: 0, count: TimingSlot.count),
            misses: [Double](repeating: 0, count: TimingSlot.count)
        )
        for slot in 0..<TimingSlot.count {
            var own = 0.0
            var inferredRead = 0.0
            var inferredMiss = 0.0
            for kind in kinds {
                own = own + reads[kind][slot] + misses[kind][slot]
                inferredRead += inferredReads[kind][slot]
                inferredMiss += inferredMisses[kind][slot]
            }
            let weight = trust / (trust + own)
            result.reads[slot] = weight * inferredRead
            result.misses[slot] = weight * inferredMiss
        }
        return result
    }

    /// Adds another user's evidence (a tenant's population is the sum of its users').
    public mutating func add(_ other: ReadEvidence) {
        deliveryCounts = zip(deliveryCounts, other.deliveryCounts).map { $0 + $1 }
        readCount += other.readCount
        for kind in 0..<reads.count {
            Self.add(&reads[kind], other.reads[kind])
            Self.add(&misses[kind], other.misses[kind])
            Self.add(&inferredReads[kind], other.inferredReads[kind])
            Self.add(&inferredMisses[kind], other.inferredMisses[kind])
        }
    }
}
