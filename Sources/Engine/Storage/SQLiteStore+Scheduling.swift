import Foundation
import GRDB

extension SQLiteStore {
    public func dueSchedules(notAfter now: Date, after: ScheduleCursor?, limit: Int) async throws -> [ScheduleEntry] {
        try await read { db in
            let rows = try Row.fetchCursor(
                db.cachedStatement(sql: Self.dueSchedulesSQL),
                arguments: [
                    now.unixSeconds, after?.fireAt.unixSeconds ?? -Double.greatestFiniteMagnitude,
                    after?.user.rawValue ?? Int64.min, max(0, limit),
                ]
            )
            var entries: [ScheduleEntry] = []
            while let row = try rows.next() { entries.append(try Self.scheduleEntry(from: row)) }
            return entries
        }
    }

    public func scheduleEntry(tenant: TenantID, user: UserID) async throws -> ScheduleEntry? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT \(Self.scheduleEntryColumns)
                    FROM schedules s JOIN users u ON u.id = s.user_id WHERE s.user_id = ? AND s.tenant_id = ?
                    """,
                arguments: [user.rawValue, tenant.rawValue]
            ).map(Self.scheduleEntry(from:))
        }
    }

    public func nextFireTime() async throws -> Date? {
        try await read { db in
            let schedule = try Double.fetchOne(db, sql: "SELECT MIN(fire_at) FROM schedules WHERE fire_at IS NOT NULL")
            let reminder = try Double.fetchOne(db, sql: "SELECT MIN(fire_at) FROM reminders")
            return [schedule, reminder].compactMap { $0 }.min().map(Date.init(unixSeconds:))
        }
    }

    public func selectionHistories(
        tenant: TenantID,
        users: [UserID],
        since: Date
    ) async throws -> [UserID: SelectionHistory] {
        guard !users.isEmpty else { return [:] }
        return try await read { db in
            var histories: [UserID: SelectionHistory] = Dictionary(
                uniqueKeysWithValues: users.map { ($0, SelectionHistory()) }
            )
            // A few statements per batch of users rather than two per user, with padded `IN` lists so that each
            // statement is prepared once per connection (parsing a 500-entry list for every batch was 2% of a
            // burst).
            try Self.forEachUserList(users, tenant: tenant) { list, values in
                let recent = try db.cachedStatement(
                    sql: """
                        SELECT user_id, impulse_id, MAX(assigned_at) AS at FROM deliveries
                        WHERE user_id IN (\(list)) AND tenant_id = ? AND assigned_at >= ? GROUP BY user_id, impulse_id
                        """
                )
                try recent.bindPositionally(values + [since.unixSeconds.databaseValue])
                for row in try Row.fetchAll(recent) {
                    histories[UserID(row[0] as Int64)]?.recent[ImpulseID(trusted: row[1])] = Date(unixSeconds: row[2])
                }
                let series = try db.cachedStatement(
                    sql: """
                        SELECT d.user_id, i.series, MAX(i.series_position) AS position FROM deliveries d
                        JOIN impulses i ON i.tenant_id = d.tenant_id AND i.id = d.impulse_id
                        WHERE d.user_id IN (\(list)) AND d.tenant_id = ? AND i.series IS NOT NULL
                        GROUP BY d.user_id, i.series
                        """
                )
                try series.bindPositionally(values)
                for row in try Row.fetchAll(series) {
                    histories[UserID(row[0] as Int64)]?.seriesProgress[row[1]] = row[2]
                }
            }
            return histories
        }
    }

    public func commitSchedules(_ updates: [ScheduleUpdate]) async throws -> [Delivery] {
        guard !updates.isEmpty else { return [] }
        return try await write { db in
            let insert = try db.cachedStatement(sql: Self.insertDeliverySQL)
            // The move is a compare-and-set on the fire time the batch read (a concurrent preference change wins);
            // the delivered date is recorded either way. Right-hand sides read the row as it was before.
            let deliveredAndMove = try db.cachedStatement(
                sql: """
                    UPDATE schedules SET last_date = MAX(COALESCE(last_date, ''), ?),
                        fire_at = CASE WHEN fire_at = ? THEN ? ELSE fire_at END,
                        local_date = CASE WHEN fire_at = ? THEN ? ELSE local_date END
                    WHERE user_id = ? AND tenant_id = ?
                    """
            )
            let move = try db.cachedStatement(
                sql: """
                    UPDATE schedules SET fire_at = ?, local_date = ?
                    WHERE user_id = ? AND tenant_id = ? AND fire_at = ?
                    """
            )
            var recorded: [Delivery] = []
            recorded.reserveCapacity(updates.count)
            // The day-level report counts a decision when it took effect: its delivery is new, or its row moved.
            var tally = EngagementTally()
            // A burst commits thousands of days per batch: they go `schedulesPerStatement` to a statement (one
            // multi-row INSERT and one UPDATE ... FROM), the rest one by one, in order, with the same effect.
            // `UPDATE ... FROM` applies only one source row per target row, so a batch that names a user twice
            // goes one by one.
            var users = Set<Int64>(minimumCapacity: updates.count)
            let distinct = updates.allSatisfy { update in
                users.insert(update.user.rawValue).inserted && (update.delivery.map { $0.user == update.user } ?? true)
            }
            let days = distinct ? updates.filter { $0.delivery != nil } : []
            let bulk = days.count - days.count % Self.schedulesPerStatement
            if bulk > 0 {
                let insertMany = try db.cachedStatement(sql: Self.insertDaysSQL)
                let deliveredAndMoveMany = try db.cachedStatement(sql: Self.deliveredAndMoveManySQL)
                for start in stride(from: 0, to: bulk, by: Self.schedulesPerStatement) {
                    let chunk = days[start..<start + Self.schedulesPerStatement]
                    let before = recorded.count
                    try self.insertDays(chunk, with: insertMany, into: &recorded)
                    let new = Set(recorded[before...].map(\.user))
                    for update in chunk where new.contains(update.user) {
                        if let day = update.tally { tally.dispatched(day, tenant: update.tenant) }
                    }
                    var values: [DatabaseValue] = []
                    values.reserveCapacity(6 * chunk.count)
                    for update in chunk {
                        values.append(update.delivery?.localDate.databaseValue ?? .null)
                        values.append(update.expectedFireAt.unixSeconds.databaseValue)
                        values.append(update.next?.fireAt.unixSeconds.databaseValue ?? .null)
                        values.append(update.next?.date.description.databaseValue ?? .null)
                        values.append(update.user.rawValue.databaseValue)
                        values.append(update.tenant.rawValue.databaseValue)
                    }
                    try deliveredAndMoveMany.bindPositionally(values)
                    try deliveredAndMoveMany.execute()
                }
            }
            var daysSeen = 0
            for update in updates {
                if update.delivery != nil {
                    daysSeen += 1
                    if daysSeen <= bulk { continue }  // committed above
                }
                let expected = update.expectedFireAt.unixSeconds
                let nextFireAt = update.next?.fireAt.unixSeconds
                let nextDate = update.next?.date.description
                if let new = update.delivery {
                    if let delivery = try self.insert(new, with: insert, db) {
                        recorded.append(delivery)
                        if let day = update.tally { tally.dispatched(day, tenant: update.tenant) }
                    }
                    try deliveredAndMove.execute(arguments: [
                        new.localDate, expected, nextFireAt, expected, nextDate, update.user.rawValue,
                        update.tenant.rawValue,
                    ])
                } else {
                    try move.execute(arguments: [
                        nextFireAt, nextDate, update.user.rawValue, update.tenant.rawValue, expected,
                    ])
                    if db.changesCount > 0, let day = update.tally { tally.dispatched(day, tenant: update.tenant) }
                }
            }
            tally.assigned(recorded)
            try self.writeTimings(updates, db)
            try self.recordEngagement(tally, db)
            try self.apply(.deliveriesRecorded(recorded), db)
            return recorded
        }
    }

    /// Inserts a chunk of days with one statement and appends the rows that were new, in the chunk's order.
    private func insertDays(
        _ chunk: ArraySlice<ScheduleUpdate>,
        with statement: Statement,
        into recorded: inout [Delivery]
    ) throws {
        var values: [DatabaseValue] = []
        values.reserveCapacity(8 * chunk.count)
        for update in chunk {
            guard let new = update.delivery else { continue }
            let assignedAt = new.assignedAt.unixSeconds
            values.append(new.tenant.rawValue.databaseValue)
            values.append(new.impulse.rawValue.databaseValue)
            values.append(new.kind.rawValue.databaseValue)
            values.append(new.localDate.databaseValue)
            values.append(assignedAt.databaseValue)
            values.append(new.awaitsPush ? .null : assignedAt.databaseValue)
            values.append(new.user.rawValue.databaseValue)
            values.append(new.reportDay.databaseValue)
        }
        // RETURNING yields the inserted rows in no promised order: match them to the chunk by user.
        var ids: [Int64: Int64] = [:]
        try statement.bindPositionally(values)
        let rows = try Row.fetchCursor(statement)
        while let row = try rows.next() { ids[row[1]] = row[0] }
        guard !ids.isEmpty else { return }
        for update in chunk {
            guard let new = update.delivery, let id = ids[new.user.rawValue] else { continue }
            recorded.append(
                Delivery(
                    id: DeliveryID(id),
                    tenant: new.tenant,
                    user: new.user,
                    impulse: new.impulse,
                    kind: new.kind,
                    localDate: new.localDate,
                    assignedAt: Date(unixSeconds: new.assignedAt.unixSeconds),
                    reportDay: new.reportDay
                )
            )
        }
    }

    static let schedulesPerStatement = 64

    /// `schedulesPerStatement` rows of (tenant, impulse, kind, local date, assigned, settled, user, report day):
    /// the same rows as `insertDeliverySQL` would insert one by one, only for a user of that tenant, none for a
    /// daily key that exists. (`WHERE true` lets SQLite parse the upsert clause after a join.)
    static let insertDaysSQL = """
        INSERT INTO deliveries (tenant_id, user_id, impulse_id, kind, local_date, assigned_at, settled_at, report_day)
        SELECT v.column1, u.id, v.column2, v.column3, v.column4, v.column5, v.column6, v.column8
        FROM (VALUES \(Array(repeating: "(?,?,?,?,?,?,?,?)", count: schedulesPerStatement).joined(separator: ","))) AS v
        JOIN users u ON u.id = v.column7 AND u.tenant_id = v.column1
        WHERE true
        ON CONFLICT DO NOTHING
        RETURNING id, user_id
        """

    /// `schedulesPerStatement` rows of (local date, expected fire time, next fire time, next date, user, tenant):
    /// the one-row `deliveredAndMove` of `commitSchedules` for each.
    static let deliveredAndMoveManySQL = """
        UPDATE schedules SET last_date = MAX(COALESCE(schedules.last_date, ''), v.column1),
            fire_at = CASE WHEN schedules.fire_at = v.column2 THEN v.column3 ELSE schedules.fire_at END,
            local_date = CASE WHEN schedules.fire_at = v.column2 THEN v.column4 ELSE schedules.local_date END
        FROM (VALUES \(Array(repeating: "(?,?,?,?,?,?)", count: schedulesPerStatement).joined(separator: ","))) AS v
        WHERE schedules.user_id = v.column5 AND schedules.tenant_id = v.column6
        """

    public func unsettledDeliveries(
        assignedAfter: Date,
        after: DeliveryID?,
        limit: Int
    ) async throws -> [Delivery] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: Self.unsettledSQL,
                arguments: [after?.rawValue ?? 0, assignedAfter.unixSeconds, max(0, limit)]
            ).map { Self.delivery(from: $0) }
        }
    }

    public func giveUpUnsettled(assignedBefore: Date, limit: Int) async throws -> [TenantID: Int] {
        try await write { db in
            let now = Date()
            var effects = MarkEffects(subscriptions: try self.webhookSubscriptions(db))
            var given: [TenantID: Int] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    UPDATE deliveries SET settled_at = ?, pushed_devices = NULL
                    WHERE id IN (
                        SELECT id FROM deliveries WHERE settled_at IS NULL AND assigned_at < ? ORDER BY id LIMIT ?)
                    RETURNING \(Self.reportColumns), pushed_at
                    """,
                arguments: [now.unixSeconds, assignedBefore.unixSeconds, max(0, limit)]
            )
            while let row = try rows.next() {
                let tenant = TenantID(trusted: row[0])
                given[tenant, default: 0] += 1
                // One that some device took was counted as pushed then; one that none took fails now.
                guard (row[5] as Double?) == nil else { continue }
                effects.changed(
                    .failed(noDevice: false),
                    tenant: tenant,
                    day: row[1],
                    impulse: ImpulseID(trusted: row[2]),
                    delivery: row[3],
                    user: row[4],
                    at: now
                )
            }
            try self.recordEngagement(effects.tally, db)
            let users = effects.users
            if !users.isEmpty {
                try self.apply(.events(effects.records(usernames: try self.usernames(users, db))), db)
            }
            return given
        }
    }

    // MARK: Reminders

    public func createReminder(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        at fireAt: Date,
        maximumPending: Int
    ) async throws -> Reminder {
        try await write { db in
            let pending =
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM reminders WHERE user_id = ? AND tenant_id = ?",
                    arguments: [user.rawValue, tenant.rawValue]
                ) ?? 0
            guard pending < maximumPending else {
                throw EngineError(.conflict, "at most \(maximumPending) reminders may be pending")
            }
            let now = Date().unixSeconds
            try db.execute(
                sql:
                    "INSERT INTO reminders (tenant_id, user_id, impulse_id, fire_at, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [tenant.rawValue, user.rawValue, impulse.rawValue, fireAt.unixSeconds, now]
            )
            return Reminder(
                id: db.lastInsertedRowID,
                tenant: tenant,
                user: user,
                impulse: impulse,
                fireAt: Date(unixSeconds: fireAt.unixSeconds),
                createdAt: Date(unixSeconds: now)
            )
        }
    }

    public func reminders(tenant: TenantID, user: UserID) async throws -> [Reminder] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM reminders WHERE user_id = ? AND tenant_id = ? ORDER BY fire_at, id",
                arguments: [user.rawValue, tenant.rawValue]
            ).map(Self.reminder(from:))
        }
    }

    public func deleteReminder(tenant: TenantID, user: UserID, id: Int64) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM reminders WHERE id = ? AND user_id = ? AND tenant_id = ?",
                arguments: [id, user.rawValue, tenant.rawValue]
            )
            return db.changesCount > 0
        }
    }

    public func dueReminders(notAfter now: Date, limit: Int) async throws -> [Reminder] {
        try await read { db in
            try Row.fetchAll(
                db,
                // A suspended tenant's reminders wait for it to be resumed.
                sql: """
                    SELECT r.* FROM reminders r JOIN tenants t ON t.id = r.tenant_id
                    WHERE r.fire_at <= ? AND t.suspended = 0 ORDER BY r.fire_at, r.id LIMIT ?
                    """,
                arguments: [now.unixSeconds, max(0, limit)]
            ).map(Self.reminder(from:))
        }
    }

    public func fireReminders(
        _ reminders: [Reminder],
        at now: Date,
        reportDays: [TenantID: String]
    ) async throws -> [Delivery] {
        guard !reminders.isEmpty else { return [] }
        return try await write { db in
            let insert = try db.cachedStatement(sql: Self.insertDeliverySQL)
            let delete = try db.cachedStatement(sql: "DELETE FROM reminders WHERE id = ?")
            var recorded: [Delivery] = []
            for reminder in reminders {
                try delete.execute(arguments: [reminder.id])
                // Already fired (another node, or a retry of this batch): nothing to record.
                guard db.changesCount > 0 else { continue }
                let new = NewDelivery(
                    tenant: reminder.tenant,
                    user: reminder.user,
                    impulse: reminder.impulse,
                    kind: .reminder,
                    assignedAt: now,
                    awaitsPush: true,
                    reportDay: reportDays[reminder.tenant]
                )
                if let delivery = try self.insert(new, with: insert, db) { recorded.append(delivery) }
            }
            try self.recordAssigned(recorded, db)
            try self.apply(.deliveriesRecorded(recorded), db)
            return recorded
        }
    }

    /// The due rows: a range search on the `schedules_due` index, never a scan of the users.
    /// The columns `scheduleEntry(from:)` reads, by position in this order.
    static let scheduleEntryColumns = """
        s.user_id, s.tenant_id, s.fire_at, s.local_date, s.last_date, u.enabled, u.language,
            u.life_areas, u.time_zone, u.delivery_minute, u.quiet_start, u.quiet_end, u.weekdays, s.not_before
        """

    static let dueSchedulesSQL = """
        SELECT \(scheduleEntryColumns)
        FROM schedules s JOIN users u ON u.id = s.user_id
        WHERE s.fire_at IS NOT NULL AND s.fire_at <= ? AND (s.fire_at, s.user_id) > (?, ?)
        ORDER BY s.fire_at, s.user_id LIMIT ?
        """

    /// Unsettled deliveries, through the partial index that holds only them.
    static let unsettledSQL = """
        SELECT * FROM deliveries WHERE settled_at IS NULL AND id > ? AND assigned_at >= ? ORDER BY id LIMIT ?
        """

    /// An entry from a row of `scheduleEntryColumns`, read by position: a burst decodes a million of them, and
    /// looking columns up by name cost more than the rest of the decoding.
    static func scheduleEntry(from row: Row) throws -> ScheduleEntry {
        let localDate: String? = row[3]
        let lastDate: String? = row[4]
        let fireAt: Double = row[2] ?? 0
        return ScheduleEntry(
            tenant: TenantID(trusted: row[1]),
            user: UserID(row[0] as Int64),
            fireAt: Date(unixSeconds: fireAt),
            localDate: localDate.flatMap { try? LocalDate(parsing: $0) },
            lastDate: lastDate.flatMap { try? LocalDate(parsing: $0) },
            enabled: row[5],
            language: row[6],
            lifeAreas: try StoredForm.decodeScores(row[7]),
            preferences: try StoredForm.preferences(
                timeZone: row[8],
                deliveryMinute: row[9],
                quietStart: row[10],
                quietEnd: row[11],
                weekdays: row[12]
            ),
            notBefore: (row[13] as Double?).flatMap { $0 > 0 ? Date(unixSeconds: $0) : nil }
        )
    }

    static func reminder(from row: Row) -> Reminder {
        Reminder(
            id: row["id"],
            tenant: TenantID(trusted: row["tenant_id"]),
            user: UserID(row["user_id"]),
            impulse: ImpulseID(trusted: row["impulse_id"]),
            fireAt: Date(unixSeconds: row["fire_at"]),
            createdAt: Date(unixSeconds: row["created_at"])
        )
    }
}
