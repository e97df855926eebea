import Foundation

/// What happened to one impulse's deliveries of one tenant's day: the pre-aggregated row the reports read.
///
/// A delivery belongs to its report day for good: the local date it is for (a scheduled one), or the tenant's date
/// when it was assigned (a manual one or a reminder). Its push, fetch and read are counted on that day, so a rate
/// compares a day's deliveries with what became of them.
public struct EngagementCounts: Sendable, Equatable {
    public var assigned = 0
    /// Accepted by APNs for at least one device.
    public var pushed = 0
    /// Settled without a push: the user had no device.
    public var noDevice = 0
    /// Settled without an accepted push: every device's push was rejected or dropped.
    public var failed = 0
    public var fetched = 0
    public var read = 0
    /// Reads by time from push to read, in ``ReadLatency/bounds`` buckets (reads of unpushed deliveries have none).
    public var readLatency = [Int](repeating: 0, count: ReadLatency.bounds.count + 1)
    /// Pushed deliveries and their reads by the channel that accepted the push: a delivery pushed to a user's
    /// iPhone and Android phone counts on both.
    public var channels: [PushChannel: ChannelCounts] = [:]

    public init() {}

    public mutating func add(_ other: EngagementCounts) {
        assigned += other.assigned
        pushed += other.pushed
        noDevice += other.noDevice
        failed += other.failed
        fetched += other.fetched
        read += other.read
        for index in readLatency.indices { readLatency[index] += other.readLatency[index] }
        for (channel, counts) in other.channels { channels[channel, default: ChannelCounts()].add(counts) }
    }

    /// Read deliveries per assigned one (nil without any).
    public var readRate: Double? { assigned > 0 ? Double(read) / Double(assigned) : nil }

    /// The median time from push to read, estimated from the buckets.
    public var medianSecondsToRead: Double? { ReadLatency.median(readLatency) }
}

/// One channel's share of an ``EngagementCounts`` row.
public struct ChannelCounts: Sendable, Equatable {
    /// Deliveries the channel accepted a push of.
    public var pushed = 0
    /// Those of them read.
    public var read = 0

    public init(pushed: Int = 0, read: Int = 0) {
        self.pushed = pushed
        self.read = read
    }

    public mutating func add(_ other: ChannelCounts) {
        pushed += other.pushed
        read += other.read
    }

    /// Reads per pushed delivery (nil without any).
    public var readRate: Double? { pushed > 0 ? Double(read) / Double(pushed) : nil }
}

/// What the scheduler did with one tenant's day for its users: the day-level row the reports read.
public struct DispatchCounts: Sendable, Equatable {
    /// Users whose day came: delivered, with nothing to deliver, or skipped as stale.
    public var due = 0
    /// Days whose time had passed longer ago than the staleness limit (the broker was down): not delivered.
    public var skippedStale = 0
    /// Days not among the user's weekdays.
    public var skippedWeekday = 0
    /// Deliveries whose time fell inside the quiet hours and moved to their end.
    public var deferredQuietHours = 0

    public init() {}

    public mutating func add(_ other: DispatchCounts) {
        due += other.due
        skippedStale += other.skippedStale
        skippedWeekday += other.skippedWeekday
        deferredQuietHours += other.deferredQuietHours
    }

    /// Enabled users the day concerned: due, or skipped by their weekdays.
    public var active: Int { due + skippedWeekday }
}

/// Time from push to read, in buckets: the report's median without keeping each read.
public enum ReadLatency {
    /// Upper bounds of the buckets, in seconds; a last bucket holds what is slower.
    public static let bounds: [Double] = [
        60, 300, 900, 1_800, 3_600, 7_200, 14_400, 28_800, 43_200, 86_400, 172_800, 604_800,
    ]

    public static func bucket(seconds: Double) -> Int {
        bounds.firstIndex { seconds <= $0 } ?? bounds.count
    }

    /// The median, interpolated inside the bucket that holds it (the last, open bucket answers its lower bound).
    public static func median(_ buckets: [Int]) -> Double? {
        quantile(buckets, rank: Double(buckets.reduce(0, +)) / 2)
    }
}

/// One tenant's day and impulse: the key of an ``EngagementCounts`` row.
public struct EngagementKey: Hashable, Sendable, Comparable {
    public var tenant: TenantID
    public var day: String
    public var impulse: ImpulseID

    public init(tenant: TenantID, day: String, impulse: ImpulseID) {
        self.tenant = tenant
        self.day = day
        self.impulse = impulse
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.tenant.rawValue, lhs.day, lhs.impulse.rawValue) < (rhs.tenant.rawValue, rhs.day, rhs.impulse.rawValue)
    }
}

/// One tenant's day: the key of a ``DispatchCounts`` row.
public struct DispatchKey: Hashable, Sendable, Comparable {
    public var tenant: TenantID
    public var day: String

    public init(tenant: TenantID, day: String) {
        self.tenant = tenant
        self.day = day
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.tenant.rawValue, lhs.day) < (rhs.tenant.rawValue, rhs.day)
    }
}

/// The report rows one ledger transaction changes, added up so that the transaction writes each row once.
///
/// Stores fill it with what their statements did (only rows that changed count, so a mark applied twice counts
/// once) and add it to the daily rows in the same transaction, in key order (two transactions never wait for each
/// other's rows in opposite orders).
public struct EngagementTally: Sendable, Equatable {
    public private(set) var engagement: [EngagementKey: EngagementCounts] = [:]
    public private(set) var dispatch: [DispatchKey: DispatchCounts] = [:]

    public init() {}

    public var isEmpty: Bool { engagement.isEmpty && dispatch.isEmpty }

    public mutating func count(
        _ field: WritableKeyPath<EngagementCounts, Int>,
        tenant: TenantID,
        day: String,
        impulse: ImpulseID,
        by amount: Int = 1
    ) {
        engagement[EngagementKey(tenant: tenant, day: day, impulse: impulse), default: EngagementCounts()][
            keyPath: field
        ] += amount
    }

    /// A first push accepted, on `channels`.
    public mutating func pushed(tenant: TenantID, day: String, impulse: ImpulseID, channels: PushChannels) {
        let key = EngagementKey(tenant: tenant, day: day, impulse: impulse)
        engagement[key, default: EngagementCounts()].pushed += 1
        for channel in channels.channels {
            engagement[key, default: EngagementCounts()].channels[channel, default: ChannelCounts()].pushed += 1
        }
    }

    /// A delivery already counted as pushed, accepted on further `channels` (pushed device by device).
    public mutating func pushedOn(tenant: TenantID, day: String, impulse: ImpulseID, channels: PushChannels) {
        let key = EngagementKey(tenant: tenant, day: day, impulse: impulse)
        for channel in channels.channels {
            engagement[key, default: EngagementCounts()].channels[channel, default: ChannelCounts()].pushed += 1
        }
    }

    /// A first read: counted, with its time from push to read when the delivery was pushed, and on the channels
    /// its push went out on.
    public mutating func read(
        tenant: TenantID,
        day: String,
        impulse: ImpulseID,
        pushedAt: Date?,
        readAt: Date,
        channels: PushChannels = []
    ) {
        let key = EngagementKey(tenant: tenant, day: day, impulse: impulse)
        engagement[key, default: EngagementCounts()].read += 1
        if let pushedAt {
            let bucket = ReadLatency.bucket(seconds: max(0, readAt.timeIntervalSince(pushedAt)))
            engagement[key, default: EngagementCounts()].readLatency[bucket] += 1
        }
        for channel in channels.channels {
            engagement[key, default: EngagementCounts()].channels[channel, default: ChannelCounts()].read += 1
        }
    }

    /// New deliveries: each counted as assigned on its report day.
    public mutating func assigned(_ recorded: [Delivery]) {
        for delivery in recorded {
            count(\.assigned, tenant: delivery.tenant, day: delivery.reportDay, impulse: delivery.impulse)
        }
    }

    public mutating func dispatched(_ tally: DayTally, tenant: TenantID) {
        var counts = DispatchCounts()
        counts.due = tally.due ? 1 : 0
        counts.skippedStale = tally.stale ? 1 : 0
        counts.deferredQuietHours = tally.deferredByQuietHours ? 1 : 0
        dispatch[DispatchKey(tenant: tenant, day: tally.date.description), default: DispatchCounts()].add(counts)
        for day in tally.skippedWeekdays {
            dispatch[DispatchKey(tenant: tenant, day: day.description), default: DispatchCounts()].skippedWeekday += 1
        }
    }

    /// The engagement rows in key order.
    public var engagementRows: [(key: EngagementKey, counts: EngagementCounts)] {
        engagement.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The dispatch rows in key order.
    public var dispatchRows: [(key: DispatchKey, counts: DispatchCounts)] {
        dispatch.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}

/// What one scheduler decision adds to the day-level report: the day that came (due or stale), whether quiet hours
/// moved it, and the days before the next one that the user's weekdays leave out. The store counts it only when
/// the decision is committed (the day's delivery was new, or the row moved), so a decision made twice counts once.
public struct DayTally: Sendable, Equatable {
    public var date: LocalDate
    public var due: Bool
    public var stale: Bool
    public var deferredByQuietHours: Bool
    public var skippedWeekdays: [LocalDate]

    public init(
        date: LocalDate,
        due: Bool = true,
        stale: Bool = false,
        deferredByQuietHours: Bool = false,
        skippedWeekdays: [LocalDate] = []
    ) {
        self.date = date
        self.due = due
        self.stale = stale
        self.deferredByQuietHours = deferredByQuietHours
        self.skippedWeekdays = skippedWeekdays
    }
}
