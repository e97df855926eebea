import Foundation
import GRDB

extension SQLiteStore {
    /// Adds a transaction's tally to the reports' daily rows, in key order, inside that transaction.
    func recordEngagement(_ tally: EngagementTally, _ db: Database) throws {
        guard !tally.isEmpty else { return }
        let engagement = try db.cachedStatement(
            sql: """
                INSERT INTO engagement_days (tenant_id, day, impulse_id, assigned, pushed, no_device, failed, fetched,
                    read)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, day, impulse_id) DO UPDATE SET
                    assigned = assigned + excluded.assigned, pushed = pushed + excluded.pushed,
                    no_device = no_device + excluded.no_device, failed = failed + excluded.failed,
                    fetched = fetched + excluded.fetched, read = read + excluded.read
                """
        )
        let latency = try db.cachedStatement(
            sql: """
                INSERT INTO engagement_read_latency (tenant_id, day, impulse_id, bucket, reads) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, day, impulse_id, bucket) DO UPDATE SET reads = reads + excluded.reads
                """
        )
        let channels = try db.cachedStatement(
            sql: """
                INSERT INTO engagement_channels (tenant_id, day, impulse_id, channel, pushed, read) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, day, impulse_id, channel) DO UPDATE SET
                    pushed = pushed + excluded.pushed, read = read + excluded.read
                """
        )
        for (key, counts) in tally.engagementRows {
            try engagement.execute(arguments: [
                key.tenant.rawValue, key.day, key.impulse.rawValue, counts.assigned, counts.pushed, counts.noDevice,
                counts.failed, counts.fetched, counts.read,
            ])
            for (bucket, reads) in counts.readLatency.enumerated() where reads > 0 {
                try latency.execute(arguments: [key.tenant.rawValue, key.day, key.impulse.rawValue, bucket, reads])
            }
            for channel in PushChannel.allCases {
                guard let row = counts.channels[channel] else { continue }
                try channels.execute(arguments: [
                    key.tenant.rawValue, key.day, key.impulse.rawValue, channel.rawValue, row.pushed, row.read,
                ])
            }
        }
        let dispatch = try db.cachedStatement(
            sql: """
                INSERT INTO dispatch_days (tenant_id, day, due, skipped_stale, skipped_weekday, deferred_quiet_hours)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, day) DO UPDATE SET
                    due = due + excluded.due, skipped_stale = skipped_stale + excluded.skipped_stale,
                    skipped_weekday = skipped_weekday + excluded.skipped_weekday,
                    deferred_quiet_hours = deferred_quiet_hours + excluded.deferred_quiet_hours
                """
        )
        for (key, counts) in tally.dispatchRows {
            try dispatch.execute(arguments: [
                key.tenant.rawValue, key.day, counts.due, counts.skippedStale, counts.skippedWeekday,
                counts.deferredQuietHours,
            ])
        }
    }

    /// The report's reads, by key range: a tenant's rows, engagement, read latency and dispatch, of a range of days.
    static let engagementSQL = [
        """
        SELECT day, impulse_id, assigned, pushed, no_device, failed, fetched, read FROM engagement_days
        WHERE tenant_id = ? AND day BETWEEN ? AND ?
        """,
        """
        SELECT day, impulse_id, bucket, reads FROM engagement_read_latency
        WHERE tenant_id = ? AND day BETWEEN ? AND ?
        """,
        """
        SELECT day, due, skipped_stale, skipped_weekday, deferred_quiet_hours FROM dispatch_days
        WHERE tenant_id = ? AND day BETWEEN ? AND ?
        """,
        """
        SELECT day, impulse_id, channel, pushed, read FROM engagement_channels
        WHERE tenant_id = ? AND day BETWEEN ? AND ?
        """,
        """
        SELECT day, arm, bucket, deliveries FROM timing_outcomes
        WHERE tenant_id = ? AND day BETWEEN ? AND ?
        """,
        """
        SELECT user_id, week, arm, deliveries, within_hour, read FROM timing_user_weeks
        WHERE tenant_id = ? AND week BETWEEN ? AND ?
        """,
    ]

    public func engagement(tenant: TenantID, from: LocalDate, through: LocalDate) async throws -> EngagementRecords {
        try await read { db in
            let arguments: StatementArguments = [tenant.rawValue, from.description, through.description]
            var records = EngagementRecords()
            for row in try Row.fetchAll(
                db,
                sql: Self.engagementSQL[0],
                arguments: arguments
            ) {
                var counts = EngagementCounts()
                (counts.assigned, counts.pushed, counts.noDevice) = (row[2], row[3], row[4])
                (counts.failed, counts.fetched, counts.read) = (row[5], row[6], row[7])
                records.engagement[EngagementKey(tenant: tenant, day: row[0], impulse: ImpulseID(trusted: row[1]))] =
                    counts
            }
            for row in try Row.fetchAll(
                db,
                sql: Self.engagementSQL[1],
                arguments: arguments
            ) {
                let key = EngagementKey(tenant: tenant, day: row[0], impulse: ImpulseID(trusted: row[1]))
                let bucket: Int = row[2]
                guard records.engagement[key] != nil, bucket >= 0, bucket <= ReadLatency.bounds.count else { continue }
                records.engagement[key]?.readLatency[bucket] += row[3]
            }
            for row in try Row.fetchAll(
                db,
                sql: Self.engagementSQL[2],
                arguments: arguments
            ) {
                var counts = DispatchCounts()
                (counts.due, counts.skippedStale, counts.skippedWeekday) = (row[1], row[2], row[3])
                counts.deferredQuietHours = row[4]
                records.dispatch[row[0]] = counts
            }
            for row in try Row.fetchAll(
                db,
                sql: Self.engagementSQL[3],
                arguments: arguments
            ) {
                let key = EngagementKey(tenant: tenant, day: row[0], impulse: ImpulseID(trusted: row[1]))
                guard records.engagement[key] != nil, let channel = PushChannel(rawValue: row[2]) else { continue }
                records.engagement[key]?.channels[channel] = ChannelCounts(pushed: row[3], read: row[4])
            }
            for row in try Row.fetchAll(db, sql: Self.engagementSQL[4], arguments: arguments) {
                records.timing[row[0], default: TimingDayCounts()].add(arm: row[1], bucket: row[2], count: row[3])
            }
            // The weeks the range touches: from the Monday of its first day.
            let weeks: StatementArguments = [
                tenant.rawValue, from.adding(days: 1 - from.isoWeekday).description, through.description,
            ]
            for row in try Row.fetchAll(db, sql: Self.engagementSQL[5], arguments: weeks) {
                guard let week = try? LocalDate(parsing: row[1] as String) else { continue }
                records.timingUsers.append(
                    TimingUserWeek(
                        user: UserID(row[0]),
                        week: week,
                        holdout: (row[2] as Int) == 1,
                        deliveries: row[3],
                        withinHour: row[4],
                        read: row[5]
                    )
                )
            }
            return records
        }
    }

    /// The ``ReadLatency`` bucket of a number of seconds, in SQL (both stores' migrations count old reads with it).
    static func latencyBucketSQL(_ seconds: String) -> String {
        "CASE "
            + ReadLatency.bounds.enumerated().map { "WHEN \(seconds) <= \($0.element) THEN \($0.offset)" }
            .joined(separator: " ") + " ELSE \(ReadLatency.bounds.count) END"
    }
}
