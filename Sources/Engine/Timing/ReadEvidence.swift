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
    /// `[kind][slot]`.
    public internal(set) var reads: [[Double]]
    public internal(set) var misses: [[Double]]

    public init() {
        reads = Array(repeating: Array(repeating: 0, count: TimingSlot.count), count: DayKind.allCases.count)
        misses = reads
    }

    /// One delivery pushed in `slot` on a day of `kind`: read within the hour, or not.
    public mutating func observe(_ slot: TimingSlot, _ kind: DayKind, read: Bool) {
        deliveryCounts[kind.rawValue] += 1
        if read { readCount += 1 }
        tally(slot, kind, read: read, weight: 1)
    }

    /// What one delivery's push-to-read delay says: read within the hour, a read in the slot it was pushed in;
    /// otherwise a miss there, and when it was read later that day, a read (of `lateWeight`) in the slot it was
    /// read in: the user was reading then.
    public mutating func observe(
        pushedAt pushed: LocalTime,
        readAt read: LocalTime?,
        _ kind: DayKind,
        lateWeight: Double = LearnedTiming.lateReadWeight
    ) {
        let slot = TimingSlot(containing: pushed)
        deliveryCounts[kind.rawValue] += 1
        if read != nil { readCount += 1 }
        guard let read, read >= pushed else {
            tally(slot, kind, read: false, weight: 1)
            return
        }
        if read.minuteOfDay - pushed.minuteOfDay <= 60 {
            tally(slot, kind, read: true, weight: 1)
        } else {
            tally(slot, kind, read: false, weight: 1)
            tally(TimingSlot(containing: read), kind, read: true, weight: lateWeight)
        }
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
            return (
                zip(reads[0], reads[1]).map { $0 + $1 },
                zip(misses[0], misses[1]).map { $0 + $1 }
            )
        }
        return (reads[kind.rawValue], misses[kind.rawValue])
    }

    /// Adds another user's evidence (a tenant's population is the sum of its users').
    public mutating func add(_ other: ReadEvidence) {
        deliveryCounts = zip(deliveryCounts, other.deliveryCounts).map { $0 + $1 }
        readCount += other.readCount
        for kind in 0..<reads.count {
            for slot in 0..<TimingSlot.count {
                reads[kind][slot] += other.reads[kind][slot]
                misses[kind][slot] += other.misses[kind][slot]
            }
        }
    }
}
