import Foundation

/// What APNs refused (or could not be reached for), per tenant and kind, so that a failing push path is seen at
/// once: the first refusal of a kind is logged as it happens, later ones at most once a minute with their count,
/// and `/inspect` shows each kind's count and last time. Pure: the caller gives the time and does the logging.
public struct RefusalLog: Sendable {
    /// One kind of refusal of one tenant's pushes.
    public struct Entry: Sendable, Equatable {
        public var kind: String
        public var count: Int
        public var firstAt: Date
        public var lastAt: Date
        /// Refusals since the last log line about this kind, and when that line was written.
        var unlogged: Int
        var loggedAt: Date
    }

    /// What to log for a refusal just noted.
    public enum Notice: Sendable, Equatable {
        /// The first of its kind (or the first after an hour without one).
        case first
        /// `count` refusals of the kind since the last line, `since` seconds ago.
        case repeated(count: Int, since: TimeInterval)
    }

    let interval: TimeInterval
    let forgetAfter: TimeInterval
    let kindsPerTenant: Int
    private var entries: [TenantID: [String: Entry]] = [:]

    /// - Parameters: interval: the least time between two lines about one kind; forgetAfter: a kind not seen for
    ///   this long is forgotten (and logged at once when it comes back); kindsPerTenant: the kinds kept per tenant
    ///   (the least recent goes first).
    public init(interval: TimeInterval = 60, forgetAfter: TimeInterval = 3600, kindsPerTenant: Int = 16) {
        self.interval = interval
        self.forgetAfter = forgetAfter
        self.kindsPerTenant = kindsPerTenant
    }

    /// Notes `count` refusals of a kind; returns what to log now, if anything.
    public mutating func note(tenant: TenantID, kind: String, count: Int = 1, at now: Date) -> Notice? {
        var kinds = entries[tenant, default: [:]]
        defer { entries[tenant] = kinds }
        guard var entry = kinds[kind], now.timeIntervalSince(entry.lastAt) < forgetAfter else {
            if kinds[kind] == nil, kinds.count >= kindsPerTenant,
                let oldest = kinds.min(by: { $0.value.lastAt < $1.value.lastAt })?.key
            {
                kinds[oldest] = nil
            }
            kinds[kind] = Entry(kind: kind, count: count, firstAt: now, lastAt: now, unlogged: count - 1, loggedAt: now)
            return .first
        }
        entry.count += count
        entry.lastAt = now
        entry.unlogged += count
        defer { kinds[kind] = entry }
        let since = now.timeIntervalSince(entry.loggedAt)
        guard since >= interval, entry.unlogged > 0 else { return nil }
        let notice = Notice.repeated(count: entry.unlogged, since: since)
        entry.unlogged = 0
        entry.loggedAt = now
        return notice
    }

    /// The kinds seen for a tenant in the last `forgetAfter`, most recent first.
    public func recent(tenant: TenantID, at now: Date) -> [Entry] {
        (entries[tenant] ?? [:]).values.filter { now.timeIntervalSince($0.lastAt) < forgetAfter }
            .sorted { $0.lastAt > $1.lastAt }
    }
}
