import Engine
import Foundation

/// One simulated subscriber as the broker sees them: what they set, and whether they let their time be learned.
public struct WorldReader: Sendable, Equatable {
    /// An IANA zone name; the broker plans and the world reads in it.
    public var timeZone: String
    /// The delivery time the user set (on the half hour: the simulation ticks every half hour).
    public var stated: LocalTime
    /// Their own quiet hours; nil: the tenant's.
    public var quietHours: QuietHours?
    /// The days they take the programme (ISO 1-7); the tenant's programme days apply as well.
    public var weekdays: Weekdays
    /// Whether they let the stated time be learned (the broker keeps it otherwise).
    public var optedIn: Bool
    /// A label results are grouped by ("morning", "evening", "never-reads", "moves-earlier", ...).
    public var group: String
    /// The day (0: the world's first day) from which the habit is a different one, when it moves.
    public var habitMovesOnDay: Int?

    public init(
        timeZone: String,
        stated: LocalTime,
        quietHours: QuietHours? = nil,
        weekdays: Weekdays = .all,
        optedIn: Bool = true,
        group: String,
        habitMovesOnDay: Int? = nil
    ) {
        self.timeZone = timeZone
        self.stated = stated
        self.quietHours = quietHours
        self.weekdays = weekdays
        self.optedIn = optedIn
        self.group = group
        self.habitMovesOnDay = habitMovesOnDay
    }
}

/// A population of simulated readers and how they read, for judging learned delivery time on worlds it was not
/// tuned on (issue 45). Deterministic for its seed.
///
/// `readTime` is the world's luck: a pure function of the reader and the instant a push reached them, in which two
/// pushes on the same local day meet the same luck (common random numbers: the day's app opens, say, are drawn once
/// per reader and day and a push is read at the first one after it), so that a push at the learned time, at the
/// stated time and at the oracle's time can be compared on the same day. `chanceWithinHour` is the same reader's
/// chance, over that luck, of reading a push at that instant within 60 minutes: the oracle chooses by it.
public protocol ReaderWorld: Sendable {
    /// The family's name ("session", "weekend", ...).
    var family: String { get }
    var seed: UInt64 { get }
    /// The first day's midnight in UTC; a Monday.
    var start: Date { get }
    /// The tenant's quiet hours and programme days.
    var tenantQuietHours: QuietHours { get }
    var tenantWeekdays: Weekdays { get }
    var readers: [WorldReader] { get }
    /// When reader `reader` (an index into `readers`) first reads a push that reached their phone at `pushedAt`;
    /// nil when they never do.
    func readTime(reader: Int, pushedAt: Date) -> Date?
    /// The chance that a push at `pushedAt` is read within 60 minutes.
    func chanceWithinHour(reader: Int, pushedAt: Date) -> Double
}
