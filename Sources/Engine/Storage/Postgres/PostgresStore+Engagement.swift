import Foundation
import PostgresNIO

extension PostgresStore {
    /// Adds a transaction's tally to the reports' daily rows inside that transaction: one statement per table, rows
    /// in key order (two nodes' transactions never wait for each other's rows in opposite orders).
    func recordEngagement(_ tally: EngagementTally, _ connection: PostgresConnection) async throws {
        guard !tally.isEmpty else { return }
        let rows = tally.engagementRows
        if !rows.isEmpty {
            let counts = rows.map(\.counts)
            try await connection.run(
                """
                INSERT INTO engagement_days AS e (tenant_id, day, impulse_id, assigned, pushed, no_device, failed,
                    fetched, read)
                SELECT * FROM UNNEST(\(rows.map(\.key.tenant.rawValue)), \(rows.map(\.key.day)),
                    \(rows.map(\.key.impulse.rawValue)), \(counts.map(\.assigned)), \(counts.map(\.pushed)),
                    \(counts.map(\.noDevice)), \(counts.map(\.failed)), \(counts.map(\.fetched)),
                    \(counts.map(\.read)))
                ON CONFLICT (tenant_id, day, impulse_id) DO UPDATE SET
                    assigned = e.assigned + excluded.assigned, pushed = e.pushed + excluded.pushed,
                    no_device = e.no_device + excluded.no_device, failed = e.failed + excluded.failed,
                    fetched = e.fetched + excluded.fetched, read = e.read + excluded.read
                """,
                logger
            )
            var latency: (tenants: [String], days: [String], impulses: [String], buckets: [Int], reads: [Int]) =
                ([], [], [], [], [])
            for (key, counts) in rows {
                for (bucket, reads) in counts.readLatency.enumerated() where reads > 0 {
                    latency.tenants.append(key.tenant.rawValue)
                    latency.days.append(key.day)
                    latency.impulses.append(key.impulse.rawValue)
                    latency.buckets.append(bucket)
                    latency.reads.append(reads)
                }
            }
            var channels:
                (tenants: [String], days: [String], impulses: [String], names: [String], pushed: [Int], read: [Int]) =
                    ([], [], [], [], [], [])
            for (key, counts) in rows {
                for channel in PushChannel.allCases {
                    guard let row = counts.channels[channel] else { continue }
                    channels.tenants.append(key.tenant.rawValue)
                    channels.days.append(key.day)
                    channels.impulses.append(key.impulse.rawValue)
                    channels.names.append(channel.rawValue)
                    channels.pushed.append(row.pushed)
                    channels.read.append(row.read)
                }
            }
            if !channels.names.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO engagement_channels AS c (tenant_id, day, impulse_id, channel, pushed, read)
                    SELECT * FROM UNNEST(\(channels.tenants), \(channels.days), \(channels.impulses),
                        \(channels.names), \(channels.pushed), \(channels.read))
                    ON CONFLICT (tenant_id, day, impulse_id, channel) DO UPDATE SET
                        pushed = c.pushed + excluded.pushed, read = c.read + excluded.read
                    """,
                    logger
                )
            }
            if !latency.reads.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO engagement_read_latency AS l (tenant_id, day, impulse_id, bucket, reads)
                    SELECT * FROM UNNEST(\(latency.tenants), \(latency.days), \(latency.impulses),
                        \(latency.buckets), \(latency.reads))
                    ON CONFLICT (tenant_id, day, impulse_id, bucket) DO UPDATE SET reads = l.reads + excluded.reads
                    """,
                    logger
                )
            }
        }
        let days = tally.dispatchRows
        if !days.isEmpty {
            let counts = days.map(\.counts)
            try await connection.run(
                """
                INSERT INTO dispatch_days AS d (tenant_id, day, due, skipped_stale, skipped_weekday,
                    deferred_quiet_hours)
                SELECT * FROM UNNEST(\(days.map(\.key.tenant.rawValue)), \(days.map(\.key.day)),
                    \(counts.map(\.due)), \(counts.map(\.skippedStale)), \(counts.map(\.skippedWeekday)),
                    \(counts.map(\.deferredQuietHours)))
                ON CONFLICT (tenant_id, day) DO UPDATE SET
                    due = d.due + excluded.due, skipped_stale = d.skipped_stale + excluded.skipped_stale,
                    skipped_weekday = d.skipped_weekday + excluded.skipped_weekday,
                    deferred_quiet_hours = d.deferred_quiet_hours + excluded.deferred_quiet_hours
                """,
                logger
            )
        }
    }

    /// Counts new deliveries as assigned in the reports' daily rows.
    func recordAssigned(_ recorded: [Delivery], _ connection: PostgresConnection) async throws {
        var tally = EngagementTally()
        tally.assigned(recorded)
        try await recordEngagement(tally, connection)
    }

    public func engagement(tenant: TenantID, from: LocalDate, through: LocalDate) async throws -> EngagementRecords {
        try await read { [self] connection in
            let (id, first, last) = (tenant.rawValue, from.description, through.description)
            var records = EngagementRecords()
            for row in try await connection.rows(
                """
                SELECT day, impulse_id, assigned, pushed, no_device, failed, fetched, read FROM engagement_days
                WHERE tenant_id = \(id) AND day BETWEEN \(first) AND \(last)
                """,
                logger
            ) {
                let (day, impulse): (String, String) = (try row.at(0), try row.at(1))
                var counts = EngagementCounts()
                (counts.assigned, counts.pushed, counts.noDevice) = (try row.at(2), try row.at(3), try row.at(4))
                (counts.failed, counts.fetched, counts.read) = (try row.at(5), try row.at(6), try row.at(7))
                records.engagement[EngagementKey(tenant: tenant, day: day, impulse: ImpulseID(trusted: impulse))] =
                    counts
            }
            for row in try await connection.rows(
                """
                SELECT day, impulse_id, bucket, reads FROM engagement_read_latency
                WHERE tenant_id = \(id) AND day BETWEEN \(first) AND \(last)
                """,
                logger
            ) {
                let (day, impulse): (String, String) = (try row.at(0), try row.at(1))
                let (bucket, reads): (Int, Int) = (try row.at(2), try row.at(3))
                let key = EngagementKey(tenant: tenant, day: day, impulse: ImpulseID(trusted: impulse))
                guard records.engagement[key] != nil, bucket >= 0, bucket <= ReadLatency.bounds.count else { continue }
                records.engagement[key]?.readLatency[bucket] += reads
            }
            for row in try await connection.rows(
                """
                SELECT day, due, skipped_stale, skipped_weekday, deferred_quiet_hours FROM dispatch_days
                WHERE tenant_id = \(id) AND day BETWEEN \(first) AND \(last)
                """,
                logger
            ) {
                var counts = DispatchCounts()
                (counts.due, counts.skippedStale) = (try row.at(1), try row.at(2))
                (counts.skippedWeekday, counts.deferredQuietHours) = (try row.at(3), try row.at(4))
                records.dispatch[try row.at(0, as: String.self)] = counts
            }
            for row in try await connection.rows(
                """
                SELECT day, impulse_id, channel, pushed, read FROM engagement_channels
                WHERE tenant_id = \(id) AND day BETWEEN \(first) AND \(last)
                """,
                logger
            ) {
                let (day, impulse, name): (String, String, String) = (try row.at(0), try row.at(1), try row.at(2))
                let key = EngagementKey(tenant: tenant, day: day, impulse: ImpulseID(trusted: impulse))
                guard records.engagement[key] != nil, let channel = PushChannel(rawValue: name) else { continue }
                records.engagement[key]?.channels[channel] = ChannelCounts(pushed: try row.at(3), read: try row.at(4))
            }
            for row in try await connection.rows(
                """
                SELECT day, arm, bucket, deliveries FROM timing_outcomes
                WHERE tenant_id = \(id) AND day BETWEEN \(first) AND \(last)
                """,
                logger
            ) {
                records.timing[try row.at(0, as: String.self), default: TimingDayCounts()].add(
                    arm: try row.at(1),
                    bucket: try row.at(2),
                    count: try row.at(3)
                )
            }
            // The weeks the range touches: from the Monday of its first day.
            let firstWeek = from.adding(days: 1 - from.isoWeekday).description
            for row in try await connection.rows(
                """
                SELECT user_id, week, arm, deliveries, within_hour, read FROM timing_user_weeks
                WHERE tenant_id = \(id) AND week BETWEEN \(firstWeek) AND \(last)
                """,
                logger
            ) {
                guard let week = try? LocalDate(parsing: try row.at(1, as: String.self)) else { continue }
                records.timingUsers.append(
                    TimingUserWeek(
                        user: UserID(try row.at(0, as: Int64.self)),
                        week: week,
                        holdout: try row.at(2, as: Int.self) == 1,
                        deliveries: try row.at(3),
                        withinHour: try row.at(4),
                        read: try row.at(5)
                    )
                )
            }
            return records
        }
    }
}
