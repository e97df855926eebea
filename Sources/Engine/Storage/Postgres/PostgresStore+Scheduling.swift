import Foundation
import PostgresNIO

extension PostgresStore {
    /// The columns `scheduleEntry(from:)` reads, by position in this order.
    static let scheduleEntryColumns = """
        s.user_id, s.tenant_id, s.fire_at, s.local_date, s.last_date, u.enabled, u.language,
            u.life_areas, u.time_zone, u.delivery_minute, u.quiet_start, u.quiet_end, u.weekdays, s.not_before
        """

    /// Claims the due rows it returns for this node (`claimTime`): another node's scheduler skips a claimed row
    /// (`FOR UPDATE SKIP LOCKED` while the claim is being taken, the claim's owner and expiry after), so that
    /// nodes share the dispatch instead of deciding every row twice. The commit releases the claim; a node that
    /// dies leaves it to expire. Exactly once per day does not depend on claims: the commit's compare-and-set and
    /// the daily key hold even when two nodes decide the same row.
    public func dueSchedules(notAfter now: Date, after: ScheduleCursor?, limit: Int) async throws -> [ScheduleEntry] {
        let wall = Date().unixSeconds
        let statement = ClaimDueRows(
            notAfter: now.unixSeconds,
            afterFireAt: after?.fireAt.unixSeconds ?? -Double.greatestFiniteMagnitude,
            afterUser: after?.user.rawValue ?? Int64.min,
            now: wall,
            node: nodeID,
            limit: max(0, limit),
            until: wall + configuration.claimTime.seconds
        )
        let claimed = try await read { [self] connection in try await connection.all(statement, logger) }
        heldClaims.withLock { $0.claimed(claimed.map(\.user.rawValue), until: statement.until) }
        return claimed
    }

    public func scheduleEntry(tenant: TenantID, user: UserID) async throws -> ScheduleEntry? {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.scheduleEntryColumns)
                FROM schedules s JOIN users u ON u.id = s.user_id
                WHERE s.user_id = \(user.rawValue) AND s.tenant_id = \(tenant.rawValue)
                """,
                logger
            ).first.map(Self.scheduleEntry(from:))
        }
    }

    /// The earliest fire time of a row no other node has claimed, or of a reminder.
    public func nextFireTime() async throws -> Date? {
        let wall = Date().unixSeconds
        return try await read { [self] connection in
            let row = try await connection.rows(
                """
                SELECT LEAST(
                    (SELECT fire_at FROM schedules WHERE fire_at IS NOT NULL
                        AND (claimed_until IS NULL OR claimed_until < \(wall) OR claimed_by = \(nodeID))
                        ORDER BY fire_at LIMIT 1),
                    (SELECT MIN(fire_at) FROM reminders))
                """,
                logger
            ).first
            return try row?.at(0, as: Double?.self).map(Date.init(unixSeconds:))
        }
    }

    public func selectionHistories(
        tenant: TenantID,
        users: [UserID],
        since: Date
    ) async throws -> [UserID: SelectionHistory] {
        guard !users.isEmpty else { return [:] }
        let ids = users.map(\.rawValue)
        return try await read { [self] connection in
            var histories = [UserID: SelectionHistory](
                uniqueKeysWithValues: users.map { ($0, SelectionHistory()) }
            )
            // One walk down the user's deliveries, newest first, per user: with statistics taken when the table
            // was smaller (a burst adds a million rows within a minute), the planner otherwise hashes a scan of every
            // delivery. The newest 1,000 in the window stand for the history of a user who has more.
            for row in try await connection.rows(
                """
                SELECT d.user_id, d.impulse_id, MAX(d.assigned_at)
                FROM UNNEST(\(ids)::bigint[]) AS u(id) CROSS JOIN LATERAL (
                    SELECT user_id, impulse_id, assigned_at FROM deliveries
                    WHERE user_id = u.id AND tenant_id = \(tenant.rawValue) AND assigned_at >= \(since.unixSeconds)
                    ORDER BY id DESC LIMIT 1000
                ) d
                GROUP BY d.user_id, d.impulse_id
                """,
                logger
            ) {
                let user = UserID(try row.at(0, as: Int64.self))
                histories[user]?.recent[ImpulseID(trusted: try row.at(1))] = Date(unixSeconds: try row.at(2))
            }
            for row in try await connection.rows(
                """
                SELECT d.user_id, i.series, MAX(i.series_position) FROM deliveries d
                JOIN impulses i ON i.tenant_id = d.tenant_id AND i.id = d.impulse_id
                WHERE d.user_id = ANY(\(ids)) AND d.tenant_id = \(tenant.rawValue) AND i.series IS NOT NULL
                GROUP BY d.user_id, i.series
                """,
                logger
            ) {
                let user = UserID(try row.at(0, as: Int64.self))
                histories[user]?.seriesProgress[try row.at(1)] = try row.at(2, as: Int?.self)
            }
            return histories
        }
    }

    /// The batch in one transaction: its days with one insert (`insert(_:_:)`), and the rows moved with one
    /// `UPDATE ... FROM UNNEST` (``MoveSchedules``) when no user appears twice (one statement per row otherwise, in
    /// order). The move is a compare-and-set on the fire time the batch read (a concurrent preference change
    /// wins); the delivered date is recorded either way.
    public func commitSchedules(_ updates: [ScheduleUpdate]) async throws -> [Delivery] {
        guard !updates.isEmpty else { return [] }
        var users = Set<Int64>(minimumCapacity: updates.count)
        let distinct = updates.allSatisfy { users.insert($0.user.rawValue).inserted }
        let recorded = try await write { [self] connection in
            let recorded = try await self.insert(updates.compactMap(\.delivery), connection)
            // The day-level report counts a decision when it took effect: its delivery is new, or its row moved.
            var tally = EngagementTally()
            let new = Set(recorded.map(\.user))
            for update in updates where update.delivery != nil && new.contains(update.user) {
                if let day = update.tally { tally.dispatched(day, tenant: update.tenant) }
            }
            let groups = distinct ? [updates[...]] : updates.map { [$0][...] }
            for group in groups {
                let moved = try await connection.all(
                    MoveSchedules(
                        users: group.map(\.user.rawValue),
                        tenants: group.map(\.tenant.rawValue),
                        expected: group.map(\.expectedFireAt.unixSeconds),
                        nextFire: group.map { $0.next?.fireAt.unixSeconds ?? .nan },
                        nextDate: group.map { $0.next?.date.description ?? "" },
                        delivered: group.map { $0.delivery.map { $0.localDate ?? "" } ?? "" },
                        watched: group.map { $0.delivery == nil && $0.tally != nil }
                    ),
                    logger
                )
                let movedUsers = Set(moved)
                for update in group where update.delivery == nil && movedUsers.contains(update.user.rawValue) {
                    if let day = update.tally { tally.dispatched(day, tenant: update.tenant) }
                }
            }
            tally.assigned(recorded)
            try await self.writeTimings(updates, connection)
            try await self.recordEngagement(tally, connection)
            // Last, as every write takes it (StoreDuties): the report rows above, then the change feed's lock.
            try await self.apply(.deliveriesRecorded(recorded), connection)
            return recorded
        }
        heldClaims.withLock { $0.released(updates.map(\.user.rawValue)) }
        return recorded
    }

    /// Leases the deliveries it returns to this node (`leaseTime`): those another node holds under a lease that
    /// has not ended (it is pushing them) are left out. A lease that ended is taken again by its own node, or by
    /// any node once its holder is gone from `nodes` (its heartbeat stopped; ending it frees its leases at once)
    /// or never kept a heartbeat: a live node whose queue outlasts its leases (a loaded machine) does not have its
    /// deliveries pushed a second time by another node.
    public func unsettledDeliveries(
        assignedAfter: Date,
        after: DeliveryID?,
        limit: Int
    ) async throws -> [Delivery] {
        let wall = Date().unixSeconds
        return try await read { [self] connection in
            try await connection.rows(
                """
                WITH picked AS (
                    SELECT delivery_id FROM unsettled_deliveries u
                    WHERE delivery_id > \(after?.rawValue ?? 0) AND assigned_at >= \(assignedAfter.unixSeconds)
                        AND (leased_until IS NULL OR leased_until < \(wall))
                        AND (leased_by IS NULL OR leased_by = \(nodeID)
                            OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = u.leased_by))
                    ORDER BY delivery_id LIMIT \(max(0, limit))
                    FOR UPDATE OF u SKIP LOCKED
                ), leased AS (
                    UPDATE unsettled_deliveries u
                    SET leased_by = \(nodeID), leased_until = \(wall + configuration.leaseTime.seconds)
                    FROM picked WHERE u.delivery_id = picked.delivery_id
                    RETURNING u.delivery_id
                )
                SELECT \(unescaped: Self.deliveryColumns) FROM deliveries
                WHERE id IN (SELECT delivery_id FROM leased) AND settled_at IS NULL
                """,
                logger
            ).map(Self.delivery(from:)).sorted { $0.id.rawValue < $1.id.rawValue }
        }
    }

    public func giveUpUnsettled(assignedBefore: Date, limit: Int) async throws -> [TenantID: Int] {
        let wall = Date().unixSeconds
        return try await write { [self] connection in
            let now = Date()
            var effects = MarkEffects(subscriptions: try await self.webhookSubscriptions(connection))
            var given: [TenantID: Int] = [:]
            for row in try await connection.rows(
                """
                WITH picked AS (
                    SELECT delivery_id FROM unsettled_deliveries u
                    WHERE assigned_at < \(assignedBefore.unixSeconds)
                        AND (leased_by = \(nodeID)
                            OR ((leased_until IS NULL OR leased_until < \(wall))
                                AND (leased_by IS NULL OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = u.leased_by))))
                    ORDER BY delivery_id LIMIT \(max(0, limit))
                    FOR UPDATE OF u SKIP LOCKED
                ), removed AS (
                    DELETE FROM unsettled_deliveries u USING picked WHERE u.delivery_id = picked.delivery_id
                    RETURNING u.delivery_id
                )
                UPDATE deliveries d SET settled_at = \(now.unixSeconds), pushed_devices = NULL
                FROM removed WHERE d.id = removed.delivery_id AND d.settled_at IS NULL
                RETURNING d.tenant_id, d.report_day, d.impulse_id, d.id, d.user_id, d.pushed_at
                """,
                logger
            ) {
                let tenant = TenantID(trusted: try row.at(0))
                given[tenant, default: 0] += 1
                // One that some device took was counted as pushed then; one that none took fails now.
                guard try row.at(5, as: Double?.self) == nil else { continue }
                effects.changed(
                    .failed(noDevice: false),
                    tenant: tenant,
                    day: try row.at(1),
                    impulse: ImpulseID(trusted: try row.at(2)),
                    delivery: try row.at(3),
                    user: try row.at(4),
                    at: now
                )
            }
            try await self.recordEngagement(effects.tally, connection)
            let users = effects.users
            if !users.isEmpty {
                let names = try await self.usernames(users, connection)
                try await self.apply(.events(effects.records(usernames: names)), connection)
            }
            return given
        }
    }

    /// Deliveries are leased: the scheduler's sweep needs no settle time of its own.
    public var leasesUnsettledDeliveries: Bool { true }

    /// Two batches' transactions at once keep the server's cores busy while the node decides the next batch.
    public var concurrentCommits: Int { 2 }

    public func pushedDevices(tenant: TenantID, deliveries: [DeliveryID]) async throws -> [DeliveryID: Set<String>] {
        guard !deliveries.isEmpty else { return [:] }
        return try await read { [self] connection in
            var found: [DeliveryID: Set<String>] = [:]
            for row in try await connection.rows(
                """
                SELECT id, pushed_devices FROM deliveries
                WHERE tenant_id = \(tenant.rawValue) AND settled_at IS NULL
                    AND id = ANY(\(deliveries.map(\.rawValue))::bigint[])
                """,
                logger
            ) {
                found[DeliveryID(try row.at(0, as: Int64.self))] = Delivery.pushedDevices(stored: try row.at(1))
            }
            return found
        }
    }

    public func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget] {
        guard !users.isEmpty else { return [:] }
        return try await read { [self] connection in
            var targets = [UserID: PushTarget](minimumCapacity: users.count)
            for user in users { targets[user] = PushTarget(devices: [], unreadCount: 0) }
            let rows = try await connection.all(
                PushTargetRows(users: users.map(\.rawValue), tenant: tenant.rawValue),
                logger
            )
            for (device, unread, timeZone) in rows {
                targets[device.owner]?.devices.append(device)
                targets[device.owner]?.unreadCount = unread
                targets[device.owner]?.timeZone = timeZone
            }
            return targets
        }
    }

    /// An entry from a row of `scheduleEntryColumns`.
    static func scheduleEntry(from row: PostgresRandomAccessRow) throws -> ScheduleEntry {
        let localDate: String? = try row.at(3)
        let lastDate: String? = try row.at(4)
        let fireAt: Double = try row.at(2, as: Double?.self) ?? 0
        return ScheduleEntry(
            tenant: TenantID(trusted: try row.at(1)),
            user: UserID(try row.at(0, as: Int64.self)),
            fireAt: Date(unixSeconds: fireAt),
            localDate: localDate.flatMap { try? LocalDate(parsing: $0) },
            lastDate: lastDate.flatMap { try? LocalDate(parsing: $0) },
            enabled: try row.at(5),
            language: try row.at(6),
            lifeAreas: try StoredForm.decodeScores(row.at(7)),
            preferences: try StoredForm.preferences(
                timeZone: row.at(8),
                deliveryMinute: row.at(9),
                quietStart: row.at(10),
                quietEnd: row.at(11),
                weekdays: row.at(12)
            ),
            notBefore: (try row.at(13, as: Double?.self)).flatMap { $0 > 0 ? Date(unixSeconds: $0) : nil }
        )
    }
}

extension PostgresStore: SharedStore {
    /// Claims and leases this node holds that have not ended, and the pool's load.
    public func sharedState() async throws -> SharedStoreState {
        let wall = Date().unixSeconds
        let usage = poolUsage
        let leases = try await read { [self] connection in
            try await connection.rows(
                """
                SELECT count(*) FROM unsettled_deliveries WHERE leased_by = \(nodeID) AND leased_until >= \(wall)
                """,
                logger
            ).first
        }
        return SharedStoreState(
            database: configuration.redacted,
            claims: heldClaims.withLock { $0.count(at: wall) },
            leases: try leases?.at(0, as: Int.self) ?? 0,
            poolInUse: usage.inUse,
            poolWaiting: usage.waiting,
            poolSize: usage.maximum
        )
    }
}
