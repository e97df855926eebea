import Foundation

/// A wall-clock time of day, minute precision, written `HH:mm`.
public struct LocalTime: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// Minutes since local midnight, 0..<1440.
    public let minuteOfDay: Int

    public init(minuteOfDay: Int) throws(EngineError) {
        guard (0..<1440).contains(minuteOfDay) else {
            throw EngineError(.invalidInput, "time of day must be between 00:00 and 23:59")
        }
        self.minuteOfDay = minuteOfDay
    }

    /// A minute of the day already known to be in range (clamped to it otherwise).
    init(clampedMinuteOfDay minute: Int) {
        self.minuteOfDay = min(max(minute, 0), 1439)
    }

    public init(hour: Int, minute: Int) throws(EngineError) {
        guard (0..<24).contains(hour), (0..<60).contains(minute) else {
            throw EngineError(.invalidInput, "time of day must be between 00:00 and 23:59")
        }
        self.minuteOfDay = hour * 60 + minute
    }

    /// Parses `HH:mm` (24-hour clock).
    public init(parsing text: String) throws(EngineError) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2,
            let hour = Int(parts[0]), let minute = Int(parts[1])
        else {
            throw EngineError(.invalidInput, "time of day must be written HH:mm, for example 08:30")
        }
        try self.init(hour: hour, minute: minute)
    }

    public var hour: Int { minuteOfDay / 60 }
    public var minute: Int { minuteOfDay % 60 }
    public var description: String { String(format: "%02d:%02d", hour, minute) }
    public static func < (lhs: LocalTime, rhs: LocalTime) -> Bool { lhs.minuteOfDay < rhs.minuteOfDay }

    public init(from decoder: any Decoder) throws {
        self = try LocalTime(parsing: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A daily window in which no push is sent. It may wrap midnight (22:00-07:00).
public struct QuietHours: Hashable, Sendable, Codable {
    public var start: LocalTime
    public var end: LocalTime

    public init(start: LocalTime, end: LocalTime) {
        self.start = start
        self.end = end
    }

    /// `HH:mm-HH:mm`.
    public init(parsing text: String) throws(EngineError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw EngineError(.invalidInput, "quiet hours must be HH:mm-HH:mm") }
        self.init(start: try LocalTime(parsing: String(parts[0])), end: try LocalTime(parsing: String(parts[1])))
    }

    /// Whether a time of day falls inside the window (start inclusive, end exclusive).
    public func contains(_ time: LocalTime) -> Bool {
        if start == end { return false }
        if start < end { return time >= start && time < end }
        return time >= start || time < end
    }
}

/// ISO weekdays, Monday = 1 ... Sunday = 7, stored as a bit mask.
public struct Weekdays: Hashable, Sendable, Codable {
    public private(set) var mask: Int

    public static let all = Weekdays(uncheckedMask: 0b111_1111)

    public init(_ days: [Int]) throws(EngineError) {
        guard !days.isEmpty, days.allSatisfy({ (1...7).contains($0) }) else {
            throw EngineError(.invalidInput, "weekdays must be a non-empty list of 1 (Monday) to 7 (Sunday)")
        }
        self.mask = days.reduce(0) { $0 | (1 << ($1 - 1)) }
    }

    init(uncheckedMask: Int) { self.mask = uncheckedMask & 0b111_1111 }

    /// The days in both, or `other` when there is none: a user's choice among the programme's days.
    public func meeting(_ other: Weekdays) -> Weekdays {
        mask & other.mask == 0 ? other : Weekdays(uncheckedMask: mask & other.mask)
    }

    public var days: [Int] { (1...7).filter { mask & (1 << ($0 - 1)) != 0 } }
    public func contains(_ isoWeekday: Int) -> Bool { mask & (1 << (isoWeekday - 1)) != 0 }

    public init(from decoder: any Decoder) throws {
        self = try Weekdays(try decoder.singleValueContainer().decode([Int].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(days)
    }
}

/// Validates an IANA time zone identifier.
public func validatedTimeZone(_ identifier: String) throws(EngineError) -> String {
    guard !identifier.isEmpty, TimeZone(identifier: identifier) != nil else {
        throw EngineError(.invalidInput, "unknown IANA time zone '\(identifier.prefix(64))'")
    }
    return identifier
}

/// Validates a language code such as `EN`, `de` or `pt-BR`; returns it upper-cased like the original API.
public func validatedLanguage(_ code: String) throws(EngineError) -> String {
    let ok = (2...8).contains(code.count) && code.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "-") }
    guard ok else { throw EngineError(.invalidInput, "language must be a code such as EN or DE") }
    return code.uppercased()
}
