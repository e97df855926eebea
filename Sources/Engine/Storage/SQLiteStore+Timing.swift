import Foundation
import GRDB

extension SQLiteStore {
    /// The columns `userTiming(from:)` reads.
    static let userTimingColumns = """
        t.user_id, t.opted_in, t.evidence, t.folded_through, t.previous_weekday, t.previous_weekend,
            t.planned_date, t.planned_minute, t.planned_reason, t.version
        """

    public func timingBatch(tenant: TenantID, users: [UserID], since: LocalDate) async throws -> TimingBatch {
        guard !users.isEmpty else { return TimingBatch() }
        return try await read { db in
            var batch = TimingBatch()
            try Self.forEachUserList(users, tenant: tenant) { list, values in
                let states = try db.cachedStatement(
                    sql: """
                        SELECT \(Self.userTimingColumns) FROM user_timing t
                        WHERE t.user_id IN (\(list)) AND t.tenant_id = ?
                        """
                )
                try states.bindPositionally(values)
                for row in try Row.fetchAll(states) {
                    batch.users[UserID(row[0] as Int64)] = try Self.userTiming(from: row)
                }
                // The daily deliveries after what each user's state folded (the daily index serves the range).
                let outcomes = try db.cachedStatement(
                    sql: """
                        SELECT d.user_id, d.local_date, d.pushed_at, d.read_at FROM deliveries d
                        LEFT JOIN user_timing t ON t.user_id = d.user_id
                        WHERE d.user_id IN (\(list)) AND d.tenant_id = ? AND d.kind = 'scheduled'
                            AND d.local_date > COALESCE(t.folded_through, ?) AND d.pushed_at IS NOT NULL
                        ORDER BY d.user_id, d.local_date
                        """
                )
                try outcomes.bindPositionally(values + [since.adding(days: -1).description.databaseValue])
                for row in try Row.fetchAll(outcomes) {
                    guard let date = try? LocalDate(parsing: row[1]) else { continue }
                    batch.outcomes[UserID(row[0] as Int64), default: []].append(
                        TimingOutcome(
                            localDate: date,
                            pushedAt: Date(unixSeconds: row[2]),
                            readAt: (row[3] as Double?).map(Date.init(unixSeconds:))
                        )
                    )
                }
            }
            for row in try Row.fetchAll(
                db,
                sql: "SELECT kind, slot, reads, misses FROM timing_population WHERE tenant_id = ?",
                arguments: [tenant.rawValue]
            ) {
                guard let kind = DayKind(rawValue: row[0]) else { continue }
                batch.population.add(kind, TimingSlot(row[1]), reads: row[2], misses: row[3])
            }
            return batch
        }
    }

    public func userTiming(tenant: TenantID, user: UserID) async throws -> UserTiming? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT \(Self.userTimingColumns) FROM user_timing t WHERE t.user_id = ? AND t.tenant_id = ?",
                arguments: [user.rawValue, tenant.rawValue]
            ).map { try Self.userTiming(from: $0) }
        }
    }

    public func setTimingOptIn(tenant: TenantID, user: UserID, optedIn: Bool, audit: AuditEntry?) async throws {
        try await write { db in
            guard
                try Bool.fetchOne(
                    db,
                    sql: "SELECT 1 FROM users WHERE tenant_id = ? AND id = ?",
                    arguments: [tenant.rawValue, user.rawValue]
                ) != nil
            else { throw EngineError(.notFound, "no such user") }
            // The scheduler's compare-and-set is on the version, which an opt-in leaves: a fold in flight still
            // lands, and the plan below chooses with the new setting.
            try db.execute(
                sql: """
                    INSERT INTO user_timing (user_id, tenant_id, opted_in) VALUES (?, ?, ?)
                    ON CONFLICT (user_id) DO UPDATE SET opted_in = excluded.opted_in
                    """,
                arguments: [user.rawValue, tenant.rawValue, optedIn]
            )
            try db.execute(
                sql: "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = ? AND tenant_id = ?",
                arguments: [user.rawValue, tenant.rawValue]
            )
            try self.apply(.profileChanged(tenant: tenant, user: user) + .audited(audit.map { [$0] } ?? []), db)
        }
    }

    /// Writes a batch's learned-time states, each a compare-and-set on the version read, and adds what the ones
    /// that took effect folded in to their tenants' populations (in (tenant, kind, slot) order).
    func writeTimings(_ updates: [ScheduleUpdate], _ db: Database) throws {
        guard updates.contains(where: { $0.timing != nil }) else { return }
        let upsert = try db.cachedStatement(
            sql: """
                INSERT INTO user_timing (user_id, tenant_id, opted_in, evidence, folded_through, previous_weekday,
                    previous_weekend, planned_date, planned_minute, planned_reason, version)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
                ON CONFLICT (user_id) DO UPDATE SET evidence = excluded.evidence,
                    folded_through = excluded.folded_through, previous_weekday = excluded.previous_weekday,
                    previous_weekend = excluded.previous_weekend, planned_date = excluded.planned_date,
                    planned_minute = excluded.planned_minute, planned_reason = excluded.planned_reason,
                    version = user_timing.version + 1
                WHERE user_timing.version = ?
                """
        )
        var population: [TenantID: ReadEvidence] = [:]
        var outcomes: [TimingOutcomeKey: Int] = [:]
        var userWeeks: [TimingUserWeekKey: [Int]] = [:]
        for update in updates {
            guard let write = update.timing else { continue }
            let timing = write.timing
            try upsert.execute(arguments: [
                update.user.rawValue, update.tenant.rawValue, timing.optedIn, try StoredForm.encode(timing.evidence),
                timing.foldedThrough?.description, timing.previous[0]?.minuteOfDay, timing.previous[1]?.minuteOfDay,
                timing.planned?.date.description, timing.planned?.time.minuteOfDay, timing.planned?.reason.name,
                timing.version,
            ])
            guard db.changesCount > 0 else { continue }
            population[update.tenant, default: ReadEvidence()].add(write.added)
            write.tally(tenant: update.tenant, user: update.user, days: &outcomes, users: &userWeeks)
        }
        let add = try db.cachedStatement(
            sql: """
                INSERT INTO timing_population (tenant_id, kind, slot, reads, misses) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, kind, slot) DO UPDATE SET reads = reads + excluded.reads,
                    misses = misses + excluded.misses
                """
        )
        for tenant in population.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            for cell in population[tenant]?.cells ?? [] {
                try add.execute(arguments: [
                    tenant.rawValue, cell.kind.rawValue, cell.slot.index, cell.reads, cell.misses,
                ])
            }
        }
        let count = try db.cachedStatement(
            sql: """
                INSERT INTO timing_outcomes (tenant_id, day, arm, bucket, deliveries) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, day, arm, bucket) DO UPDATE SET deliveries = deliveries + excluded.deliveries
                """
        )
        for (key, deliveries) in outcomes.sorted(by: { $0.key < $1.key }) {
            try count.execute(arguments: [key.tenant.rawValue, key.day, key.arm, key.bucket, deliveries])
        }
        let perUser = try db.cachedStatement(
            sql: """
                INSERT INTO timing_user_weeks (tenant_id, user_id, week, arm, deliveries, within_hour, read)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, week, user_id) DO UPDATE SET arm = excluded.arm,
                    deliveries = deliveries + excluded.deliveries, within_hour = within_hour + excluded.within_hour,
                    read = read + excluded.read
                """
        )
        for (key, counts) in userWeeks.sorted(by: { $0.key < $1.key }) {
            try perUser.execute(arguments: [
                key.tenant.rawValue, key.user, key.week, key.arm, counts[0], counts[1], counts[2],
            ])
        }
    }

    static func userTiming(from row: Row) throws -> UserTiming {
        let evidence = try (row[2] as String?).map { try StoredForm.evidence($0) } ?? ReadEvidence()
        let planned: PlannedTiming? = {
            guard let text = row[6] as String?, let date = try? LocalDate(parsing: text),
                let minute = row[7] as Int?
            else { return nil }
            return PlannedTiming(
                date: date,
                time: LocalTime(clampedMinuteOfDay: minute),
                reason: TimingReason(name: row[8] ?? "", evidence: evidence)
            )
        }()
        return UserTiming(
            evidence: evidence,
            previous: [
                (row[4] as Int?).map(LocalTime.init(clampedMinuteOfDay:)),
                (row[5] as Int?).map(LocalTime.init(clampedMinuteOfDay:)),
            ],
            optedIn: row[1],
            foldedThrough: (row[3] as String?).flatMap { try? LocalDate(parsing: $0) },
            planned: planned,
            version: row[9]
        )
    }
}
