/// A calendar date without a time zone (`yyyy-MM-dd`, proleptic Gregorian): the user's local day.
///
/// Arithmetic is integer days since 1970-01-01 (Hinnant's civil-from-days), so it needs no `Calendar` and is
/// the same on every machine.
public struct LocalDate: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// Days since 1970-01-01.
    public let dayNumber: Int

    public init(dayNumber: Int) { self.dayNumber = dayNumber }

    public init(year: Int, month: Int, day: Int) throws(EngineError) {
        guard (1...12).contains(month), (1...31).contains(day), (1...9999).contains(year) else {
            throw EngineError(.invalidInput, "not a calendar date")
        }
        let number = Self.days(year: year, month: month, day: day)
        let date = LocalDate(dayNumber: number)
        guard date.components == (year, month, day) else { throw EngineError(.invalidInput, "not a calendar date") }
        self = date
    }

    /// Parses `yyyy-MM-dd`.
    public init(parsing text: String) throws(EngineError) {
        // yyyy-MM-dd read byte by byte (the scheduler parses two per due row); anything else is checked below.
        var utf8 = text.utf8.makeIterator()
        var fields = (0, 0, 0)
        var valid = text.utf8.count == 10
        var index = 0
        while valid, let byte = utf8.next() {
            switch index {
            case 4, 7: valid = byte == UInt8(ascii: "-")
            default:
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
                    valid = false
                    break
                }
                let digit = Int(byte - UInt8(ascii: "0"))
                if index < 4 {
                    fields.0 = fields.0 * 10 + digit
                } else if index < 7 {
                    fields.1 = fields.1 * 10 + digit
                } else {
                    fields.2 = fields.2 * 10 + digit
                }
            }
            index += 1
        }
        if valid {
            try self.init(year: fields.0, month: fields.1, day: fields.2)
            return
        }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { throw EngineError(.invalidInput, "a date must be written yyyy-MM-dd") }
        try self.init(year: year, month: month, day: day)
    }

    /// The local date of `instant` at a fixed UTC offset.
    public init(instant: Double, offsetSeconds: Int) {
        let local = Int((instant + Double(offsetSeconds)).rounded(.down))
        self.dayNumber = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
    }

    public func adding(days: Int) -> LocalDate { LocalDate(dayNumber: dayNumber + days) }

    /// ISO weekday: Monday = 1 ... Sunday = 7 (1970-01-01 was a Thursday).
    public var isoWeekday: Int { ((dayNumber % 7 + 7 + 3) % 7) + 1 }

    public var components: (year: Int, month: Int, day: Int) {
        let z = dayNumber + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `yyyy-MM-dd`, written byte by byte: the scheduler prints three per due user, and padding interpolated
    /// strings was 2% of a burst's samples. Years outside 0...9999 (not reachable through the throwing
    /// initialisers) keep the general form.
    public var description: String {
        let (year, month, day) = components
        guard (0...9999).contains(year) else {
            func pad(_ value: Int, _ width: Int) -> String {
                let text = String(value)
                return String(repeating: "0", count: max(0, width - text.count)) + text
            }
            return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
        }
        return String(unsafeUninitializedCapacity: 10) { text in
            func put(_ value: Int, at start: Int, width: Int) {
                var value = value
                for index in stride(from: start + width - 1, through: start, by: -1) {
                    text[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, at: 0, width: 4)
            text[4] = UInt8(ascii: "-")
            put(month, at: 5, width: 2)
            text[7] = UInt8(ascii: "-")
            put(day, at: 8, width: 2)
            return 10
        }
    }

    public static func < (lhs: LocalDate, rhs: LocalDate) -> Bool { lhs.dayNumber < rhs.dayNumber }

    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public init(from decoder: any Decoder) throws {
        self = try LocalDate(parsing: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// FNV-1a over UTF-8: a hash that is the same in every process (Swift's `Hasher` is seeded per process), for
/// choices that must be reproducible: the spreading offset and the impulse tie-break.
public func stableHash(_ parts: String...) -> UInt64 {
    var hasher = StableHasher()
    for part in parts { hasher.combine(part) }
    return hasher.value
}

/// ``stableHash(_:)`` part by part: a prefix shared by many hashes is fed once and the state copied.
struct StableHasher {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    /// Feeds one part: its bytes, then a separator byte no UTF-8 text contains.
    mutating func combine(_ part: String) {
        var hash = value
        for byte in part.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        hash ^= 0xff
        value = hash &* 0x0000_0100_0000_01b3
    }
}
