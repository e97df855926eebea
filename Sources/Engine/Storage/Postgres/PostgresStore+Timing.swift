import Foundation
import PostgresNIO

extension PostgresStore {
    static let userTimingColumns = """
        t.user_id, t.opted_in, t.evidence, t.folded_through, t.previous_weekday, t.previous_weekend,
            t.planned_date, t.planned_minute, t.planned_reason, t.version
        """

    public func timingBatch(tenant: TenantID, users: [UserID], since: LocalDate) async throws -> TimingBatch {
        guard !users.isEmpty else { return TimingBatch() }
        let ids = users.map(\.rawValue)
        let floor = since.adding(days: -1).description
        return try await read { [self] connection in
            var batch = TimingBatch()
            for row in try await connection.rows(
                """
                SELECT \(unescaped: Self.userTimingColumns) FROM user_timing t
                WHERE t.user_id = ANY(\(ids)) AND t.tenant_id = \(tenant.rawValue)
                """,
                logger
            ) {
                batch.users[UserID(try row.at(0, as: Int64.self))] = try Self.userTiming(from: row)
            }
            // The daily deliveries after what each user's state folded (the daily index serves the range).
            for row in try await connection.rows(
                """
                SELECT d.user_id, d.local_date, d.pushed_at, d.read_at
                FROM UNNEST(\(ids)::bigint[]) AS u(id)
                LEFT JOIN user_timing t ON t.user_id = u.id
                JOIN deliveries d ON d.user_id = u.id AND d.tenant_id = \(tenant.rawValue) AND d.kind = 'scheduled'
                    AND d.local_date > COALESCE(t.folded_through, \(floor)) AND d.pushed_at IS NOT NULL
                ORDER BY d.user_id, d.local_date
                """,
                logger
            ) {
                guard let date = try? LocalDate(parsing: try row.at(1, as: String.self)) else { continue }
                batch.outcomes[UserID(try row.at(0, as: Int64.self)), default: []].append(
                    TimingOutcome(
                        localDate: date,
                        pushedAt: Date(unixSeconds: try row.at(2)),
                        readAt: (try row.at(3, as: Double?.self)).map(Date.init(unixSeconds:))
                    )
                )
            }
            for row in try await connection.rows(
                "SELECT kind, slot, reads, misses FROM timing_population WHERE tenant_id = \(tenant.rawValue)",
                logger
            ) {
                guard let kind = DayKind(rawValue: try row.at(0, as: Int.self)) else { continue }
                batch.population.add(kind, TimingSlot(try row.at(1)), reads: try row.at(2), misses: try row.at(3))
            }
            return batch
        }
    }

    public func userTiming(tenant: TenantID, user: UserID) async throws -> UserTiming? {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.userTimingColumns) FROM user_timing t
                WHERE t.user_id = \(user.rawValue) AND t.tenant_id = \(tenant.rawValue)
                """,
                logger
            ).first.map { try Self.userTiming(from: $0) }
        }
    }

    public func setTimingOptIn(tenant: TenantID, user: UserID, optedIn: Bool, audit: AuditEntry?) async throws {
        try await write { [self] connection in
            let (t, u) = (tenant.rawValue, user.rawValue)
            guard try await connection.run("SELECT 1 FROM users WHERE tenant_id = \(t) AND id = \(u)", logger) > 0
            else { throw EngineError(.notFound, "no such user") }
            // The scheduler's compare-and-set is on the version, which an opt-in leaves: a fold in flight still
            // lands, and the plan below chooses with the new setting.
            try await connection.run(
                """
                INSERT INTO user_timing (user_id, tenant_id, opted_in) VALUES (\(u), \(t), \(optedIn))
                ON CONFLICT (user_id) DO UPDATE SET opted_in = excluded.opted_in
                """,
                logger
            )
            try await connection.run(
                "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = \(u) AND tenant_id = \(t)",
                logger
            )
            try await self.apply(
                .profileChanged(tenant: tenant, user: user) + .audited(audit.map { [$0] } ?? []),
                connection
            )
        }
    }

    /// Writes a batch's learned-time states, each a compare-and-set on the version read, and adds what the ones
    /// that took effect folded in to their tenants' populations, in (tenant, kind, slot) order so that two nodes'
    /// commits lock the population's rows in one order.
    func writeTimings(_ updates: [ScheduleUpdate], _ connection: PostgresConnection) async throws {
        var population: [TenantID: ReadEvidence] = [:]
        var outcomes: [TimingOutcomeKey: Int] = [:]
        var userWeeks: [TimingUserWeekKey: [Int]] = [:]
        for update in updates {
            guard let write = update.timing else { continue }
            let timing = write.timing
            let evidence = try StoredForm.encode(timing.evidence)
            let written = try await connection.run(
                """
                INSERT INTO user_timing (user_id, tenant_id, opted_in, evidence, folded_through, previous_weekday,
                    previous_weekend, planned_date, planned_minute, planned_reason, version)
                VALUES (\(update.user.rawValue), \(update.tenant.rawValue), \(timing.optedIn), \(evidence),
                    \(timing.foldedThrough?.description), \(timing.previous[0]?.minuteOfDay),
                    \(timing.previous[1]?.minuteOfDay), \(timing.planned?.date.description),
                    \(timing.planned?.time.minuteOfDay), \(timing.planned?.reason.name), 1)
                ON CONFLICT (user_id) DO UPDATE SET evidence = excluded.evidence,
                    folded_through = excluded.folded_through, previous_weekday = excluded.previous_weekday,
                    previous_weekend = excluded.previous_weekend, planned_date = excluded.planned_date,
                    planned_minute = excluded.planned_minute, planned_reason = excluded.planned_reason,
                    version = user_timing.version + 1
                WHERE user_timing.version = \(timing.version)
                RETURNING 1
                """,
                logger
            )
            guard written > 0 else { continue }
            population[update.tenant, default: ReadEvidence()].add(write.added)
            write.tally(tenant: update.tenant, user: update.user, days: &outcomes, users: &userWeeks)
        }
        for tenant in population.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            for cell in population[tenant]?.cells ?? [] {
                try await connection.run(
                    """
                    INSERT INTO timing_population (tenant_id, kind, slot, reads, misses)
                    VALUES (\(tenant.rawValue), \(cell.kind.rawValue), \(cell.slot.index), \(cell.reads), \(cell.misses))
                    ON CONFLICT (tenant_id, kind, slot) DO UPDATE SET reads = timing_population.reads + excluded.reads,
                        misses = timing_population.misses + excluded.misses
                    """,
                    logger
                )
            }
        }
        for (key, deliveries) in outcomes.sorted(by: { $0.key < $1.key }) {
            try await connection.run(
                """
                INSERT INTO timing_outcomes (tenant_id, day, arm, bucket, deliveries)
                VALUES (\(key.tenant.rawValue), \(key.day), \(key.arm), \(key.bucket), \(deliveries))
                ON CONFLICT (tenant_id, day, arm, bucket)
                DO UPDATE SET deliveries = timing_outcomes.deliveries + excluded.deliveries
                """,
                logger
            )
        }
        // Per user and week, in one statement (a batch's users), in key order.
        let rows = userWeeks.sorted { $0.key < $1.key }
        guard !rows.isEmpty else { return }
        let (tenants, users, weeks, arms) = (
            rows.map(\.key.tenant.rawValue), rows.map(\.key.user), rows.map(\.key.week), rows.map { Int64($0.key.arm) }
        )
        let (deliveries, withinHour, read) = (
            rows.map { Int64($0.value[0]) }, rows.map { Int64($0.value[1]) }, rows.map { Int64($0.value[2]) }
        )
        try await connection.run(
            """
            INSERT INTO timing_user_weeks (tenant_id, user_id, week, arm, deliveries, within_hour, read)
            SELECT * FROM unnest(\(tenants)::text[], \(users)::bigint[], \(weeks)::text[], \(arms)::integer[],
                \(deliveries)::bigint[], \(withinHour)::bigint[], \(read)::bigint[])
            ON CONFLICT (tenant_id, week, user_id) DO UPDATE SET arm = excluded.arm,
                deliveries = timing_user_weeks.deliveries + excluded.deliveries,
                within_hour = timing_user_weeks.within_hour + excluded.within_hour,
                read = timing_user_weeks.read + excluded.read
            """,
            logger
        )
    }

    static func userTiming(from row: PostgresRandomAccessRow) throws -> UserTiming {
        let evidence = try (try row.at(2, as: String?.self)).map(StoredForm.evidence) ?? ReadEvidence()
        var planned: PlannedTiming?
        if let text = try row.at(6, as: String?.self), let date = try? LocalDate(parsing: text),
            let minute = try row.at(7, as: Int?.self)
        {
            planned = PlannedTiming(
                date: date,
                time: LocalTime(clampedMinuteOfDay: minute),
                reason: TimingReason(name: try row.at(8, as: String?.self) ?? "", evidence: evidence)
            )
        }
        return UserTiming(
            evidence: evidence,
            previous: [
                (try row.at(4, as: Int?.self)).map(LocalTime.init(clampedMinuteOfDay:)),
                (try row.at(5, as: Int?.self)).map(LocalTime.init(clampedMinuteOfDay:)),
            ],
            optedIn: try row.at(1),
            foldedThrough: (try row.at(3, as: String?.self)).flatMap { try? LocalDate(parsing: $0) },
            planned: planned,
            version: try row.at(9)
        )
    }
}
