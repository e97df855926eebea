import Foundation

/// How long APNs keeps trying to reach a phone that is offline (`apns-expiration`), chosen per tenant.
public enum PushExpiry: String, Sendable, Equatable, CaseIterable {
    /// Until the end of the user's delivery day in their time zone: a phone that comes online later that day
    /// still gets the day's impulse. The default.
    case endOfDay = "end-of-day"
    /// `apns-expiration: 0`: APNs tries once and keeps nothing.
    case immediate

    /// When APNs may stop trying a push of a delivery for `localDate` (`yyyy-MM-dd`; nil: the user's current
    /// day at `now`) in `timeZone`; nil for `apns-expiration: 0` (asked for, or the day is already over).
    public func expiration(localDate: String?, timeZone: TimeZone, now: Date) -> Date? {
        guard self == .endOfDay else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let day: Date
        if let localDate, let parsed = try? LocalDate(parsing: localDate) {
            let (year, month, date) = parsed.components
            guard let start = calendar.date(from: DateComponents(year: year, month: month, day: date)) else {
                return nil
            }
            day = start
        } else {
            day = calendar.startOfDay(for: now)
        }
        guard let end = calendar.date(byAdding: .day, value: 1, to: day), end > now else { return nil }
        return end
    }
}

/// End-of-day expirations computed once per time zone and date within a batch (a calendar computation per push
/// would cost more than the push's other preparation).
struct ExpiryCache {
    private var zones: [String: TimeZone] = [:]
    private var ends: [String: Date?] = [:]

    mutating func expiration(_ expiry: PushExpiry, localDate: String?, zone: String, now: Date) -> Date? {
        guard expiry == .endOfDay else { return nil }
        let key = zone + "|" + (localDate ?? "")
        if let known = ends[key] { return known }
        let timeZone = zones[zone] ?? TimeZone(identifier: zone) ?? .gmt
        zones[zone] = timeZone
        let end = expiry.expiration(localDate: localDate, timeZone: timeZone, now: now)
        ends[key] = end
        return end
    }
}
