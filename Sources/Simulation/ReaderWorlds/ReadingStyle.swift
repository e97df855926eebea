import Engine
import Foundation

/// How one simulated reader reads.
enum ReadingStyle: Sendable, Equatable {
    /// Never opens a push.
    case never
    /// Opens a waiting push at their first reading moment after it arrives.
    case moments(MomentReader)
    /// Reads within the hour by a chance that peaks at a habitual time, later at random.
    case peak(PeakReader)
}

/// A reader whose days are ``DayProfile``s: the usual one, a weekend's, and the one after a habit moved.
struct MomentReader: Sendable, Equatable {
    var usual: DayProfile
    /// Saturdays' and Sundays'.
    var weekend: DayProfile?
    /// From `moveDay` (0: the world's first day) on.
    var moved: DayProfile?
    var moveDay: Int?
    /// A push not read within this many seconds is never read: it is buried under newer notifications.
    var horizon: Double = 36 * 3600

    func profile(on date: LocalDate, day: Int) -> DayProfile {
        if let moved, let moveDay, day >= moveDay { return moved }
        if let weekend, date.isoWeekday >= 6 { return weekend }
        return usual
    }
}

/// A reader who opens a push within the hour by a chance that peaks at a habitual time (a regular morning read),
/// and otherwise reads it at a uniformly random later time that day (clearing notifications whenever), or never.
struct PeakReader: Sendable, Equatable {
    /// The peak, in seconds after local midnight, and its width (a normal curve's).
    var center: Double
    var width: Double
    /// The chance at the peak, above `base`.
    var peak: Double
    /// The chance through waking hours, away from the peak.
    var base: Double
    var awake: ClosedRange<Double>
    /// The chance that a push not read within the hour is read later.
    var lateChance: Double

    /// The chance of a read within the hour of a push at `wall` seconds after local midnight.
    func chance(at wall: Double) -> Double {
        let distance = (wall - center) / width
        let awakeChance = awake.contains(wall) ? base : 0
        return min(0.95, awakeChance + peak * exp(-0.5 * distance * distance))
    }
}
