import Engine
import Foundation

let hour = 3600.0
let minute = 60.0

/// The nine families of reader worlds, by name.
enum Family: String, CaseIterable {
    case session
    case weekend
    case moving
    case lowNoisy = "low-noisy"
    case edge
    case bimodal
    case zones
    case mixed
    case lateRandom = "late-random"

    /// The six zones of the zones family: four change in the world's first 60 days, two never.
    static let zoneNames = [
        "America/New_York", "Europe/Berlin", "Europe/London", "Australia/Sydney", "Asia/Kolkata", "America/Sao_Paulo",
    ]

    /// The share of never-readers, and as many who did not opt in.
    var neverShare: Double { self == .mixed ? 0.15 : 0.05 }

    /// The family's own groups and their shares of the other readers.
    var roles: [(name: String, share: Double)] {
        switch self {
        case .session: [("one-habit", 0.3), ("two-habits", 0.4), ("three-habits", 0.3)]
        case .weekend: [("weekend-later", 0.5), ("weekend-earlier", 0.5)]
        case .moving: [("moves-earlier", 0.35), ("moves-later", 0.35), ("steady", 0.3)]
        case .lowNoisy: [("very-low", 0.5), ("low", 0.5)]
        case .edge: [("beyond-late", 0.3), ("beyond-early", 0.2), ("quiet-evening", 0.25), ("quiet-morning", 0.25)]
        case .bimodal: [("morning", 2.0 / 3), ("evening", 1.0 / 3)]
        case .zones: Self.zoneNames.map { ($0, 1) }
        case .mixed: [("plain", 0.4), ("own-quiet-hours", 0.2), ("own-weekdays", 0.2), ("own-both", 0.2)]
        case .lateRandom: [("narrow-peak", 0.5), ("broad-peak", 0.5)]
        }
    }

    func reader(role: String, luck: inout SplitMix64) throws -> BuiltReader {
        switch self {
        case .session: try Self.sessionReader(role, &luck)
        case .weekend: try Self.weekendReader(role, &luck)
        case .moving: try Self.movingReader(role, &luck)
        case .lowNoisy: try Self.lowNoisyReader(role, &luck)
        case .edge: try Self.edgeReader(role, &luck)
        case .bimodal: try Self.bimodalReader(role, &luck)
        case .zones: try Self.zonesReader(role, &luck)
        case .mixed: try Self.mixedReader(role, &luck)
        case .lateRandom: try Self.lateRandomReader(role, &luck)
        }
    }

    /// The time a reader states for a habit at `center` seconds: roughly right (a normal error of 35 minutes, at
    /// most two hours), on the half hour, within `range` (hours).
    static func stated(
        near center: Double,
        _ luck: inout SplitMix64,
        in range: ClosedRange<Double> = 6.5...10
    )
        throws -> LocalTime
    {
        let error = max(-120, min(120, 35 * luck.normal())) * minute
        let halfHours = min(max(((center + error) / 1800).rounded(), range.lowerBound * 2), range.upperBound * 2)
        return try LocalTime(minuteOfDay: Int(halfHours) * 30)
    }

    /// A half hour within `range` (hours), uniformly.
    static func halfHour(in range: ClosedRange<Double>, _ luck: inout SplitMix64) throws -> LocalTime {
        let first = Int((range.lowerBound * 2).rounded())
        let last = Int((range.upperBound * 2).rounded())
        return try LocalTime(minuteOfDay: luck.int(first...last) * 30)
    }

    /// A plain habitual reader's day: a habitual moment at `center` (on 45-90% of days, spread 10-40 minutes),
    /// for 30% a weaker evening one (18:30-22:00, 10-30%), glances through waking hours (0.01-0.06 an hour) and
    /// 2-12% of days without reading.
    static func habitProfile(center: Double, _ luck: inout SplitMix64, evening: Bool = true) -> DayProfile {
        let main = ReadingHabit(
            center: center,
            spread: luck.uniform(10...40) * minute,
            count: .once(chance: luck.uniform(0.45...0.9))
        )
        let second = ReadingHabit(
            center: luck.uniform(18.5...22) * hour,
            spread: luck.uniform(20...40) * minute,
            count: .once(chance: luck.uniform(0.1...0.3))
        )
        let hasSecond = evening && luck.chance(0.3)
        return DayProfile(
            habits: hasSecond ? [main, second] : [main],
            glances: Glances(from: 6.5 * hour, to: 23 * hour, perHour: luck.uniform(0.01...0.06)),
            offDay: luck.uniform(0.02...0.12)
        )
    }

    static func built(_ reader: WorldReader, _ reading: MomentReader) -> BuiltReader {
        BuiltReader(reader: reader, style: .moments(reading))
    }
}
