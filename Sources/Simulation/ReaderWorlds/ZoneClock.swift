import Engine
import Foundation

/// A zone's UTC offsets over the world's span, found once: Foundation's look-up is too slow for the oracle's
/// many chances. Outside the span it asks Foundation.
struct ZoneClock: Sendable {
    let identifier: String
    private let zone: TimeZone
    private let span: ClosedRange<Double>
    /// The instants at which the offset changes, ascending; `offsets[i]` holds before `changes[i]`.
    private let changes: [Double]
    private let offsets: [Int]

    init(identifier: String, around start: Double) {
        let zone = TimeZone(identifier: identifier) ?? .gmt
        let span = (start - 8 * 86_400)...(start + 420 * 86_400)
        var changes: [Double] = []
        var offsets = [zone.secondsFromGMT(for: Date(timeIntervalSince1970: span.lowerBound))]
        var instant = span.lowerBound
        // Zones change at most twice a year, never twice within the three-hour step.
        while instant < span.upperBound {
            let next = min(instant + 3 * 3600, span.upperBound)
            let offset = zone.secondsFromGMT(for: Date(timeIntervalSince1970: next))
            if let last = offsets.last, offset != last {
                var low = instant
                var high = next
                while high - low > 1 {
                    let middle = ((low + high) / 2).rounded(.down)
                    if zone.secondsFromGMT(for: Date(timeIntervalSince1970: middle)) == last {
                        low = middle
                    } else {
                        high = middle
                    }
                }
                changes.append(high)
                offsets.append(offset)
            }
            instant = next
        }
        self.identifier = identifier
        self.zone = zone
        self.span = span
        self.changes = changes
        self.offsets = offsets
    }

    func offset(at instant: Double) -> Int {
        if changes.isEmpty { return offsets[0] }
        guard span.contains(instant) else { return zone.secondsFromGMT(for: Date(timeIntervalSince1970: instant)) }
        var low = 0
        var high = changes.count
        while low < high {
            let middle = (low + high) / 2
            if changes[middle] <= instant { low = middle + 1 } else { high = middle }
        }
        return offsets[low]
    }

    /// The local date of `instant` and its wall-clock seconds after that date's midnight.
    func local(_ instant: Double) -> (date: LocalDate, wall: Double) {
        let local = instant + Double(offset(at: instant))
        let day = (local / 86_400).rounded(.down)
        return (LocalDate(dayNumber: Int(day)), local - day * 86_400)
    }

    /// The wall-clock seconds of `instant` counted from `date`'s midnight (beyond 86,400 on the next day).
    func wall(of instant: Double, from date: LocalDate) -> Double {
        instant + Double(offset(at: instant)) - Double(date.dayNumber) * 86_400
    }

    /// The instant of a wall-clock time on a date: the earlier one in a repeated hour, and an hour on in a skipped
    /// one (as a phone's alarm rings).
    func instant(_ date: LocalDate, _ wall: Double) -> Double {
        let naive = Double(date.dayNumber) * 86_400 + wall
        let before = offset(at: naive - 86_400)
        let after = offset(at: naive + 86_400)
        if before == after { return naive - Double(before) }
        var found: Double?
        for candidate in [before, after] where offset(at: naive - Double(candidate)) == candidate {
            found = min(found ?? naive - Double(candidate), naive - Double(candidate))
        }
        return found ?? naive - Double(before)
    }
}
