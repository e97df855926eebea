import Foundation

/// How values without a column type of their own are stored as text, and how preference columns become
/// ``DeliveryPreferences``: one definition for every store (SQLite, PostgreSQL) and for `broker store copy`.
public enum StoredForm {
    public static func preferences(
        timeZone: String?,
        deliveryMinute: Int?,
        quietStart: Int?,
        quietEnd: Int?,
        weekdays: Int
    ) throws -> DeliveryPreferences {
        DeliveryPreferences(
            timeZone: timeZone,
            deliveryTime: try deliveryMinute.map { (minute) throws(EngineError) in try LocalTime(minuteOfDay: minute) },
            quietHours: try quietHours(start: quietStart, end: quietEnd),
            weekdays: Self.weekdays(mask: weekdays)
        )
    }

    /// Quiet hours from their two minute-of-day columns (none when either is NULL).
    public static func quietHours(start: Int?, end: Int?) throws -> QuietHours? {
        guard let start, let end else { return nil }
        return QuietHours(start: try LocalTime(minuteOfDay: start), end: try LocalTime(minuteOfDay: end))
    }

    /// Weekdays from their bit mask column.
    public static func weekdays(mask: Int) -> Weekdays { Weekdays(uncheckedMask: mask) }

    /// A certificate's topics as one column: separated by spaces (a bundle id holds none).
    public static func topics(_ topics: [String]) -> String { topics.joined(separator: " ") }
    public static func topics(_ column: String) -> [String] { column.split(separator: " ").map(String.init) }

    public static func encodeScores(_ scores: LifeAreaScores) -> String {
        scores.values.map(String.init).joined(separator: ",")
    }

    /// The stored form, `encodeScores`'s digits and commas, is read byte by byte (a burst decodes a million of
    /// them); anything else takes the general path, which keeps every integer it finds.
    public static func decodeScores(_ text: String) throws -> LifeAreaScores {
        var values: [Int] = []
        values.reserveCapacity(LifeArea.allCases.count)
        var current = 0
        var digits = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ",") {
                if digits > 0 { values.append(current) }
                current = 0
                digits = 0
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 9 {
                current = current * 10 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            } else {
                return try LifeAreaScores(text.split(separator: ",").compactMap { Int($0) })
            }
        }
        if digits > 0 { values.append(current) }
        return try LifeAreaScores(values)
    }

    public static func encodeURLs(_ urls: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(urls), as: UTF8.self)
    }

    public static func decodeURLs(_ text: String) throws -> [String] {
        try JSONDecoder().decode([String].self, from: Data(text.utf8))
    }

    /// A user's learned-time evidence, as JSON.
    public static func encode(_ evidence: ReadEvidence) throws -> String {
        String(decoding: try JSONEncoder().encode(evidence), as: UTF8.self)
    }

    public static func evidence(_ text: String) throws -> ReadEvidence {
        try JSONDecoder().decode(ReadEvidence.self, from: Data(text.utf8))
    }

    /// A tenant's learned-time settings, as JSON (NULL: the defaults, off).
    public static func encode(_ timing: LearnedTiming) throws -> String? {
        timing == LearnedTiming() ? nil : String(decoding: try JSONEncoder().encode(timing.settings), as: UTF8.self)
    }

    public static func learnedTiming(_ text: String?) -> LearnedTiming {
        guard let text, let settings = try? JSONDecoder().decode(LearnedTiming.Settings.self, from: Data(text.utf8))
        else { return LearnedTiming() }
        return LearnedTiming(settings: settings)
    }

    /// A change feed entry's subject as its `kind` and `subject` columns.
    public static func encode(_ subject: StoreChange.Subject) -> (kind: String, value: String) {
        switch subject {
        case .credentials(let username): ("credentials", username)
        case .ledger(let user): ("ledger", user.description)
        case .ledgers(let users): ("ledgers", users.map(\.description).joined(separator: ","))
        case .catalog: ("catalog", "")
        case .profile(let user): ("profile", user.description)
        case .apnsCredentials: ("apns-credentials", "")
        }
    }

    /// The subject `encode` stored; nil for a kind this version does not know (a newer node wrote it).
    public static func subject(kind: String, value: String) -> StoreChange.Subject? {
        switch kind {
        case "credentials": .credentials(username: value)
        case "ledger": .ledger(UserID(Int64(value) ?? 0))
        case "ledgers": .ledgers(value.split(separator: ",").compactMap { Int64($0).map(UserID.init) })
        case "catalog": .catalog
        case "profile": .profile(UserID(Int64(value) ?? 0))
        case "apns-credentials": .apnsCredentials
        default: nil
        }
    }

    /// The change entries for deliveries recorded in one transaction: one per tenant, naming its users once each.
    public static func ledgerSubjects(_ deliveries: [Delivery]) -> [(tenant: TenantID, subject: StoreChange.Subject)] {
        var users: [TenantID: [UserID]] = [:]
        var seen = Set<UserID>()
        for delivery in deliveries where seen.insert(delivery.user).inserted {
            users[delivery.tenant, default: []].append(delivery.user)
        }
        return users.sorted(by: { $0.key.rawValue < $1.key.rawValue }).map { tenant, users in
            (tenant, users.count == 1 ? .ledger(users[0]) : .ledgers(users))
        }
    }
}
