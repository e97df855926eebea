import Foundation

/// The daily rows of one tenant over a range of days, as the store keeps them.
public struct EngagementRecords: Sendable, Equatable {
    public var engagement: [EngagementKey: EngagementCounts] = [:]
    /// By day (`yyyy-MM-dd`).
    public var dispatch: [String: DispatchCounts] = [:]
    /// By day: the folded deliveries of tenants that learn delivery times, learned users against the holdout.
    public var timing: [String: TimingDayCounts] = [:]
    /// The users' weeks of the holdout comparison, of the weeks the range touches.
    public var timingUsers: [TimingUserWeek] = []

    public init() {}
}

/// The reports' port: the pre-aggregated daily rows of a range, read by key (never a scan of the ledger).
public protocol EngagementStore: Sendable {
    func engagement(tenant: TenantID, from: LocalDate, through: LocalDate) async throws -> EngagementRecords
}

/// The days a report covers, both ends included.
public struct ReportRange: Sendable, Equatable {
    public static let maximumDays = 366
    public static let defaultDays = 30

    public var from: LocalDate
    public var through: LocalDate

    /// `from` and `to` as `yyyy-MM-dd`; without them, the 30 days through `today` (the tenant's date).
    public init(from: String?, to: String?, today: LocalDate) throws(EngineError) {
        let through = try to.map { text throws(EngineError) in try Self.parse(text, "to") } ?? today
        let from =
            try from.map { text throws(EngineError) in try Self.parse(text, "from") }
            ?? through.adding(days: 1 - Self.defaultDays)
        guard from <= through else { throw EngineError(.invalidInput, "from (\(from)) is after to (\(through))") }
        guard through.dayNumber - from.dayNumber < Self.maximumDays else {
            throw EngineError(.invalidInput, "a report covers at most \(Self.maximumDays) days")
        }
        self.from = from
        self.through = through
    }

    private static func parse(_ text: String, _ name: String) throws(EngineError) -> LocalDate {
        do {
            return try LocalDate(parsing: text)
        } catch {
            throw EngineError(.invalidInput, "\(name) must be a date as yyyy-MM-dd")
        }
    }

    public var days: [LocalDate] { (from.dayNumber...through.dayNumber).map(LocalDate.init(dayNumber:)) }
}

/// A tenant's engagement over a range: per day (every day of the range, with the scheduler's counts), per impulse
/// and per life area. Pure: built from the store's daily rows and the catalog.
public struct EngagementReport: Sendable, Equatable {
    public struct Day: Sendable, Equatable {
        public var day: LocalDate
        public var dispatch: DispatchCounts
        public var counts: EngagementCounts
    }

    public struct ImpulseRow: Sendable, Equatable {
        public var impulse: ImpulseID
        /// Nil for an impulse no longer in the catalog.
        public var title: String?
        public var lifeArea: LifeArea?
        public var counts: EngagementCounts
    }

    public struct LifeAreaRow: Sendable, Equatable {
        /// Nil for deliveries of impulses no longer in the catalog.
        public var lifeArea: LifeArea?
        public var counts: EngagementCounts
    }

    public struct ChannelRow: Sendable, Equatable {
        public var channel: PushChannel
        public var counts: ChannelCounts
    }

    public var tenant: TenantID
    public var range: ReportRange
    public var days: [Day]
    /// Most assigned first.
    public var impulses: [ImpulseRow]
    /// In the life areas' order, then the unknown one.
    public var lifeAreas: [LifeAreaRow]
    public var total: EngagementCounts
    /// Learned delivery times against the holdout, per week (empty unless the tenant learned times in the range).
    public var timing: [TimingWeek]
    /// The same over every week of the range, with the medians of the range's days.
    public var timingOverall: TimingWeek?

    /// Every channel, in ``PushChannel``'s order: the range's pushes and reads by the channel that took the push
    /// (the total's, as rows).
    public var channels: [ChannelRow] {
        PushChannel.allCases.map { ChannelRow(channel: $0, counts: total.channels[$0] ?? ChannelCounts()) }
    }

    public init(tenant: TenantID, range: ReportRange, records: EngagementRecords, catalog: [Impulse]) {
        self.tenant = tenant
        self.range = range
        var perDay: [String: EngagementCounts] = [:]
        var perImpulse: [ImpulseID: EngagementCounts] = [:]
        var total = EngagementCounts()
        for (key, counts) in records.engagement {
            perDay[key.day, default: EngagementCounts()].add(counts)
            perImpulse[key.impulse, default: EngagementCounts()].add(counts)
            total.add(counts)
        }
        days = range.days.map { day in
            Day(
                day: day,
                dispatch: records.dispatch[day.description] ?? DispatchCounts(),
                counts: perDay[day.description] ?? EngagementCounts()
            )
        }
        let byID = Dictionary(catalog.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        impulses = perImpulse.map { id, counts in
            ImpulseRow(impulse: id, title: byID[id]?.title, lifeArea: byID[id]?.lifeArea, counts: counts)
        }
        .sorted { ($0.counts.assigned, $1.impulse.rawValue) > ($1.counts.assigned, $0.impulse.rawValue) }
        var perArea: [LifeArea?: EngagementCounts] = [:]
        for row in impulses { perArea[row.lifeArea, default: EngagementCounts()].add(row.counts) }
        lifeAreas = (LifeArea.allCases.map { Optional($0) } + [nil]).compactMap { area in
            perArea[area].map { LifeAreaRow(lifeArea: area, counts: $0) }
        }
        self.total = total
        timing = TimingWeek.weeks(records.timing, users: records.timingUsers, range: range)
        if !timing.isEmpty {
            var overall = TimingWeek(
                weekStart: range.from.adding(days: 1 - range.from.isoWeekday),
                learned: TimingArmCounts(),
                holdout: TimingArmCounts(),
                users: TimingArmComparison(records.timingUsers)
            )
            for week in timing {
                overall.learned.add(week.learned)
                overall.holdout.add(week.holdout)
            }
            timingOverall = overall
        }
    }
}

// MARK: CSV

extension EngagementReport {
    public enum Table: String, Sendable, CaseIterable {
        case days, impulses
        case lifeAreas = "life-areas"
        case channels
        case learnedTiming = "learned-timing"

        /// The table a file name asks for (`days.csv`, ...); an unknown one is not found.
        public init(file: String) throws(EngineError) {
            guard file.hasSuffix(".csv"), let table = Self(rawValue: String(file.dropLast(4))) else {
                let names = Self.allCases.map { "\($0.rawValue).csv" }
                throw EngineError(
                    .notFound,
                    "the report's tables are \(names.dropLast().joined(separator: ", ")) and \(names.last ?? "")"
                )
            }
            self = table
        }
    }

    static let countHeader = [
        "assigned", "pushed", "no_device", "failed", "fetched", "read", "read_rate", "median_seconds_to_read",
    ]

    /// One table as CSV (RFC 4180, CRLF): a header row, then a row per day, impulse or life area.
    public func csv(_ table: Table) -> String {
        var rows: [[String]] = []
        switch table {
        case .days:
            rows.append(
                ["day", "active", "due", "skipped_weekday", "skipped_stale", "deferred_quiet_hours"] + Self.countHeader
            )
            for day in days {
                let dispatch = day.dispatch
                rows.append(
                    [
                        day.day.description, "\(dispatch.active)", "\(dispatch.due)", "\(dispatch.skippedWeekday)",
                        "\(dispatch.skippedStale)", "\(dispatch.deferredQuietHours)",
                    ] + Self.cells(day.counts)
                )
            }
        case .impulses:
            rows.append(["impulse_id", "title", "life_area"] + Self.countHeader)
            for row in impulses {
                rows.append(
                    ["\(row.impulse)", row.title ?? "", row.lifeArea?.rawValue ?? ""] + Self.cells(row.counts)
                )
            }
        case .lifeAreas:
            rows.append(["life_area"] + Self.countHeader)
            for row in lifeAreas { rows.append([row.lifeArea?.rawValue ?? ""] + Self.cells(row.counts)) }
        case .channels:
            rows.append(["day", "channel", "pushed", "read", "read_rate"])
            for day in days {
                for channel in PushChannel.allCases {
                    let counts = day.counts.channels[channel] ?? ChannelCounts()
                    rows.append(
                        [
                            day.day.description, channel.rawValue, "\(counts.pushed)", "\(counts.read)",
                            counts.readRate.map { String(format: "%.4f", $0) } ?? "",
                        ]
                    )
                }
            }
        case .learnedTiming:
            // Per week, then the whole range ("all"): per arm the users, deliveries, reads within the hour and at
            // all, and the median time to read; learned minus holdout with 95% intervals over users.
            let arm = [
                "users", "deliveries", "read_within_hour", "within_hour_rate", "read", "read_rate",
                "median_seconds_to_read",
            ]
            rows.append(
                ["week_start"] + arm.map { "learned_" + $0 } + arm.map { "holdout_" + $0 }
                    + [
                        "within_hour_difference", "within_hour_low", "within_hour_high", "read_difference",
                        "read_low", "read_high",
                    ]
            )
            func rate(_ value: Double?) -> String { value.map { String(format: "%.4f", $0) } ?? "" }
            func seconds(_ value: Double?) -> String { value.map { String(Int($0.rounded())) } ?? "" }
            func cells(_ users: TimingArmComparison.Arm, _ counts: TimingArmCounts) -> [String] {
                [
                    "\(users.users)", "\(users.deliveries)", "\(users.withinHour)", rate(users.withinHourRate),
                    "\(users.read)", rate(users.readRate), seconds(counts.medianSecondsToRead),
                ]
            }
            func difference(_ difference: TimingArmComparison.Difference?) -> [String] {
                [rate(difference?.estimate), rate(difference?.low), rate(difference?.high)]
            }
            for (label, week) in timing.map({ ($0.weekStart.description, $0) })
                + (timingOverall.map { [("all", $0)] } ?? [])
            {
                rows.append(
                    [label] + cells(week.users.learned, week.learned) + cells(week.users.holdout, week.holdout)
                        + difference(week.users.withinHour) + difference(week.users.read)
                )
            }
        }
        return rows.map { $0.map(Self.field).joined(separator: ",") + "\r\n" }.joined()
    }

    static func cells(_ counts: EngagementCounts) -> [String] {
        [
            "\(counts.assigned)", "\(counts.pushed)", "\(counts.noDevice)", "\(counts.failed)", "\(counts.fetched)",
            "\(counts.read)", counts.readRate.map { String(format: "%.4f", $0) } ?? "",
            counts.medianSecondsToRead.map { String(Int($0.rounded())) } ?? "",
        ]
    }

    /// A quoted field when it must be; text a spreadsheet would run as a formula starts with an apostrophe.
    static func field(_ text: String) -> String {
        var text = text
        if let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { text = "'" + text }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
