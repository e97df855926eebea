import Foundation
import PostgresNIO

extension PostgresStore {
    /// The columns `scheduleEntry(from:)` reads, by position in this order.
    static let scheduleEntryColumns = """
        s.user_id, s.tenant_id, s.fire_at, s.local_date, s.last_date, u.enabled, u.language,
            u.life_areas, u.time_zone, u.delivery_minute, u.quiet_start, u.quiet_end, u.weekdays
        """

    /// Claims the due rows it returns for this node (`claimTime`): another node's scheduler skips a claimed row
    /// (`FOR UPDATE SKIP LOCKED` while the claim is being taken, the claim's owner and expiry after), so that
    /// nodes share the dispatch instead of deciding every row twice. The commit releases the claim; a node that
    /// dies leaves it to expire. Exactly once per day does not depend on claims: the commit's compare-and-set and
    /// the daily key hold even when two nodes decide the same row.
    public func dueSchedules(notAfter now: Date, after: ScheduleCursor?, limit: Int) async throws -> [ScheduleEntry] {
        let wall = Date().unixSeconds
        return try await read { [self] connection in
            try await connection.rows(
                """
                WITH picked AS (
                    SELECT user_id FROM schedules
                    WHERE fire_at IS NOT NULL AND fire_at <= \(now.unixSeconds)
                        AND (fire_at, user_id) > (\(after?.fireAt.unixSeconds ?? -Double.greatestFiniteMagnitude),
                            \(after?.user.rawValue ?? Int64.min))
                        AND (claimed_until IS NULL OR claimed_until < \(wall) OR claimed_by = \(nodeID))
                    ORDER BY fire_at, user_id LIMIT \(max(0, limit))
                    FOR UPDATE SKIP LOCKED
                ), claimed AS (
                    UPDATE schedules s SET claimed_by = \(nodeID), claimed_until = \(wall + configuration.claimTime.seconds)
                    FROM picked WHERE s.user_id = picked.user_id
                    RETURNING s.user_id, s.tenant_id, s.fire_at, s.local_date, s.last_date
                )
                SELECT \(unescaped: Self.scheduleEntryColumns)
                FROM claimed s JOIN users u ON u.id = s.user_id
                ORDER BY s.fire_at, s.user_id
                """,
                logger
            ).map(Self.scheduleEntry(from:))
        }
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
            for row in try await connection.rows(
                """
                SELECT user_id, impulse_id, MAX(assigned_at) FROM deliveries
                WHERE user_id = ANY(\(ids)) AND tenant_id = \(tenant.rawValue) AND assigned_at >= \(since.unixSeconds)
                GROUP BY user_id, impulse_id
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
    /// `UPDATE ... FROM UNNEST` when no user appears twice (one statement per row otherwise, in order).
    public func commitSchedules(_ updates: [ScheduleUpdate]) async throws -> [Delivery] {
        guard !updates.isEmpty else { return [] }
        var users = Set<Int64>(minimumCapacity: updates.count)
        let distinct = updates.allSatisfy { users.insert($0.user.rawValue).inserted }
        return try await write { [self] connection in
            let recorded = try await self.insert(updates.compactMap(\.delivery), connection)
            let groups = distinct ? [updates[...]] : updates.map { [$0][...] }
            for group in groups {
                // The move is a compare-and-set on the fire time the batch read (a concurrent preference change
                // wins); the delivered date is recorded either way. No next fire time (NaN here) takes the row out
                // of the index.
                try await connection.run(
                    """
                    UPDATE schedules s SET
                        last_date = CASE WHEN v.delivered = '' THEN s.last_date
                            ELSE GREATEST(COALESCE(s.last_date, ''), v.delivered) END,
                        fire_at = CASE WHEN s.fire_at = v.expected THEN NULLIF(v.next_fire, 'NaN') ELSE s.fire_at END,
                        local_date = CASE WHEN s.fire_at = v.expected THEN NULLIF(v.next_date, '')
                            ELSE s.local_date END,
                        claimed_by = NULL, claimed_until = NULL
                    FROM UNNEST(\(group.map(\.user.rawValue)), \(group.map(\.tenant.rawValue)),
                        \(group.map(\.expectedFireAt.unixSeconds)), \(group.map { $0.next?.fireAt.unixSeconds ?? .nan }),
                        \(group.map { $0.next?.date.description ?? "" }),
                        \(group.map { $0.delivery.map { $0.localDate ?? "" } ?? "" }))
                        AS v(owner, tenant, expected, next_fire, next_date, delivered)
                    WHERE s.user_id = v.owner AND s.tenant_id = v.tenant
                    """,
                    logger
                )
            }
            try await self.logLedgerChanges(connection, recorded)
            return recorded
        }
    }

    /// Leases the deliveries it returns to this node (`leaseTime`): those another node holds under a lease that
    /// has not ended (it is pushing them) are left out, and a node that died loses its leases when they end.
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
                    SELECT id AS picked_id FROM deliveries
                    WHERE settled_at IS NULL AND id > \(after?.rawValue ?? 0)
                        AND assigned_at >= \(assignedAfter.unixSeconds)
                        AND (leased_until IS NULL OR leased_until < \(wall))
                    ORDER BY id LIMIT \(max(0, limit))
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE deliveries d SET leased_by = \(nodeID), leased_until = \(wall + configuration.leaseTime.seconds)
                FROM picked WHERE d.id = picked.picked_id
                RETURNING \(unescaped: Self.deliveryColumns)
                """,
                logger
            ).map(Self.delivery(from:)).sorted { $0.id.rawValue < $1.id.rawValue }
        }
    }

    /// Deliveries are leased: the scheduler's sweep needs no settle time of its own.
    public var leasesUnsettledDeliveries: Bool { true }

    public func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget] {
        guard !users.isEmpty else { return [:] }
        return try await read { [self] connection in
            var targets = [UserID: PushTarget](minimumCapacity: users.count)
            for user in users { targets[user] = PushTarget(devices: [], unreadCount: 0) }
            for row in try await connection.rows(
                """
                SELECT d.tenant_id, d.topic, d.token, d.user_id, d.name, d.environment, d.registered_at,
                    d.quarantined_at,
                    (SELECT count(*) FROM deliveries x
                        WHERE x.user_id = d.user_id AND x.tenant_id = d.tenant_id AND x.read_at IS NULL),
                    u.time_zone
                FROM devices d JOIN users u ON u.id = d.user_id
                WHERE d.user_id = ANY(\(users.map(\.rawValue))) AND d.tenant_id = \(tenant.rawValue)
                    AND d.removed_at IS NULL
                ORDER BY d.registered_at DESC
                """,
                logger
            ) {
                let device = try Self.device(from: row)
                targets[device.owner]?.devices.append(device)
                targets[device.owner]?.unreadCount = try row.at(8, as: Int.self)
                targets[device.owner]?.timeZone = try row.at(9, as: String?.self)
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
            )
        )
    }
}

extension PostgresStore: SharedStore {
    /// Claims and leases this node holds that have not ended, and the pool's load.
    public func sharedState() async throws -> SharedStoreState {
        let wall = Date().unixSeconds
        let usage = poolUsage
        let counts = try await read { [self] connection in
            try await connection.rows(
                """
                SELECT
                    (SELECT count(*) FROM schedules
                        WHERE claimed_by = \(nodeID) AND claimed_until >= \(wall)),
                    (SELECT count(*) FROM deliveries
                        WHERE settled_at IS NULL AND leased_by = \(nodeID) AND leased_until >= \(wall))
                """,
                logger
            ).first
        }
        return SharedStoreState(
            database: configuration.redacted,
            claims: try counts?.at(0, as: Int.self) ?? 0,
            leases: try counts?.at(1, as: Int.self) ?? 0,
            poolInUse: usage.inUse,
            poolWaiting: usage.waiting,
            poolSize: usage.maximum
        )
    }
}
