import Foundation
import PostgresNIO

extension PostgresStore {
    public func recordDeliveries(_ deliveries: [NewDelivery]) async throws -> [Delivery] {
        guard !deliveries.isEmpty else { return [] }
        return try await write { [self] connection in
            let recorded = try await self.insert(deliveries, connection)
            try await self.recordAssigned(recorded, connection)
            try await self.apply(.deliveriesRecorded(recorded), connection)
            return recorded
        }
    }

    /// Inserts assignments with one statement per 5,000 and returns those inserted, in their order: a scheduled
    /// delivery whose (tenant, user, local date) exists already (in the table or earlier in `deliveries`), or
    /// whose user or impulse is not of its tenant, is left out (the joins do what foreign keys would, without
    /// locking the rows they check). The caller logs the change.
    ///
    /// The ids are drawn from the sequence first, so that the rows inserted can be matched to their positions.
    func insert(_ deliveries: [NewDelivery], _ connection: PostgresConnection) async throws -> [Delivery] {
        var recorded: [Delivery] = []
        recorded.reserveCapacity(deliveries.count)
        // Those awaiting their push are leased to this node, which pushes them next.
        let leaseEnd = Date().unixSeconds + configuration.leaseTime.seconds
        for start in stride(from: 0, to: deliveries.count, by: 5000) {
            let chunk = Array(deliveries[start..<min(deliveries.count, start + 5000)])
            let rows = try await connection.rows(
                """
                WITH v AS MATERIALIZED (
                    SELECT nextval('deliveries_id_seq') AS id, v.*
                    FROM UNNEST(\(chunk.map(\.tenant.rawValue)), \(chunk.map(\.user.rawValue)),
                        \(chunk.map(\.impulse.rawValue)), \(chunk.map(\.kind.rawValue)),
                        \(chunk.map { $0.localDate ?? "" }), \(chunk.map(\.assignedAt.unixSeconds)),
                        \(chunk.map(\.awaitsPush)), \(chunk.map(\.reportDay)))
                        WITH ORDINALITY
                        AS v(tenant, owner, impulse, kind, local_date, assigned_at, awaits, report_day, position)
                    ORDER BY position
                ), inserted AS (
                    INSERT INTO deliveries (id, tenant_id, user_id, impulse_id, kind, local_date, assigned_at,
                        settled_at, recorded_by, report_day)
                    SELECT v.id, v.tenant, u.id, v.impulse, v.kind, NULLIF(v.local_date, ''), v.assigned_at,
                        CASE WHEN v.awaits THEN NULL ELSE v.assigned_at END, \(nodeID), v.report_day
                    FROM v JOIN users u ON u.id = v.owner AND u.tenant_id = v.tenant
                    WHERE EXISTS (SELECT 1 FROM impulses i WHERE i.tenant_id = v.tenant AND i.id = v.impulse)
                    ORDER BY v.position
                    ON CONFLICT DO NOTHING
                    RETURNING id, assigned_at, settled_at
                ), awaiting AS (
                    INSERT INTO unsettled_deliveries (delivery_id, assigned_at, leased_by, leased_until)
                    SELECT id, assigned_at, \(nodeID), \(leaseEnd) FROM inserted WHERE settled_at IS NULL
                )
                SELECT v.position, v.id FROM v JOIN inserted USING (id) ORDER BY v.position
                """,
                logger
            )
            for row in rows {
                let new = chunk[Int(try row.at(0, as: Int64.self)) - 1]
                recorded.append(
                    Delivery(
                        id: DeliveryID(try row.at(1, as: Int64.self)),
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
        return recorded
    }

    /// The delivery's columns (as `delivery(from:first:)` reads them) and then the impulse's.
    static let deliveredImpulseSelect = """
        SELECT d.id, d.tenant_id, d.user_id, d.impulse_id, d.kind, d.local_date, d.assigned_at, d.pushed_at,
            d.apns_id, d.fetched_at, d.read_at, d.pushed_channels, d.pushed_devices,
            i.tenant_id, i.id, i.language, i.title, i.description_short, i.description, i.duration_minutes, i.action,
            i.single, i.image_urls, i.video_url, i.web_url, i.life_area, i.series, i.series_position
        FROM deliveries d JOIN impulses i ON i.tenant_id = d.tenant_id AND i.id = d.impulse_id
        """

    public func deliveredImpulses(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID?,
        before: DeliveryID?,
        limit: Int
    ) async throws -> [DeliveredImpulse] {
        try await read { [self] connection in
            try await connection.rows(
                """
                \(unescaped: Self.deliveredImpulseSelect)
                WHERE d.tenant_id = \(tenant.rawValue) AND d.user_id = \(user.rawValue)
                    AND d.id > \(after?.rawValue ?? 0) AND d.id < \(before?.rawValue ?? Int64.max)
                ORDER BY d.id DESC LIMIT \(max(0, limit))
                """,
                logger
            ).map(Self.deliveredImpulse(from:))
        }
    }

    public func deliveredImpulse(tenant: TenantID, user: UserID, impulse: ImpulseID) async throws -> DeliveredImpulse? {
        try await read { [self] connection in
            try await connection.rows(
                """
                \(unescaped: Self.deliveredImpulseSelect)
                WHERE d.tenant_id = \(tenant.rawValue) AND d.user_id = \(user.rawValue)
                    AND d.impulse_id = \(impulse.rawValue)
                ORDER BY d.id DESC LIMIT 1
                """,
                logger
            ).first.map(Self.deliveredImpulse(from:))
        }
    }

    public func unreadCount(tenant: TenantID, user: UserID) async throws -> Int {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT count(*) FROM deliveries
                WHERE user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue) AND read_at IS NULL
                """,
                logger
            ).first?.at(0, as: Int.self) ?? 0
        }
    }

    public func deliveryCounts(tenant: TenantID) async throws -> [UserID: Int] {
        try await read { [self] connection in
            var counts: [UserID: Int] = [:]
            for row in try await connection.rows(
                "SELECT user_id, count(*) FROM deliveries WHERE tenant_id = \(tenant.rawValue) GROUP BY user_id",
                logger
            ) {
                counts[UserID(try row.at(0, as: Int64.self))] = try row.at(1, as: Int.self)
            }
            return counts
        }
    }

    /// Pushed and settled marks (nearly all of them in a burst) go with one statement per kind; fetched and read
    /// marks (a user's taps) one by one in their order. Within a kind the first mark of a delivery wins.
    public func applyMarks(_ marks: [DeliveryMark]) async throws {
        guard !marks.isEmpty else { return }
        var pushed: [(delivery: Int64, tenant: String, at: Double, apnsID: String, channels: Int)] = []
        var settled: [(delivery: Int64, tenant: String, at: Double, noDevice: Bool)] = []
        var taps: [DeliveryMark] = []
        var progress: [DeliveryMark] = []
        var seenPushed = Set<Int64>()
        var seenSettled = Set<Int64>()
        for mark in marks {
            switch mark.kind {
            case .pushed(let apnsID, let channels):
                if seenPushed.insert(mark.delivery.rawValue).inserted {
                    pushed.append(
                        (mark.delivery.rawValue, mark.tenant.rawValue, mark.at.unixSeconds, apnsID, channels.rawValue)
                    )
                }
            case .settled, .noDevice:
                if seenSettled.insert(mark.delivery.rawValue).inserted {
                    let noDevice = mark.kind == .noDevice
                    settled.append((mark.delivery.rawValue, mark.tenant.rawValue, mark.at.unixSeconds, noDevice))
                }
            case .fetched, .read: taps.append(mark)
            case .progress: progress.append(mark)
            }
        }
        let (pushedMarks, settledMarks, userMarks, progressMarks) = (pushed, settled, taps, progress)
        try await write { [self] connection in
            let (pushed, settled, taps) = (pushedMarks, settledMarks, userMarks)
            if taps.isEmpty {
                // Only the push gateway's outcomes: committed without waiting for the WAL flush, as SQLite's
                // `synchronous = NORMAL` commits. A database crash may lose the last fraction of a second of them;
                // those deliveries are then pushed again under the same ids, as after a broker crash. A user's
                // fetched and read marks wait for the flush.
                try await connection.run("SET LOCAL synchronous_commit = off", logger)
            }
            // Only the deliveries a statement changed count in the reports and become events.
            var effects = MarkEffects(subscriptions: try await self.webhookSubscriptions(connection))
            let now = Date()
            func changed(_ rows: [MarkedRow], _ change: (MarkedRow) -> MarkEffects.Change) {
                for row in rows {
                    effects.changed(
                        change(row),
                        tenant: row.tenant,
                        day: row.day,
                        impulse: row.impulse,
                        delivery: row.delivery,
                        user: row.user,
                        at: now
                    )
                }
            }
            if !pushed.isEmpty {
                let rows = try await connection.all(
                    PushedMarks(
                        ids: pushed.map(\.delivery),
                        tenants: pushed.map(\.tenant),
                        at: pushed.map(\.at),
                        apnsIDs: pushed.map(\.apnsID),
                        channels: pushed.map(\.channels)
                    ),
                    logger
                )
                let apnsIDs =
                    effects.subscriptions.isEmpty
                    ? [:] : Dictionary(pushed.map { ($0.delivery, $0.apnsID) }, uniquingKeysWith: { first, _ in first })
                changed(rows) {
                    .pushed(apnsID: apnsIDs[$0.delivery], channels: PushChannels(stored: $0.channels, pushed: true))
                }
            }
            if !settled.isEmpty {
                let rows = try await connection.all(
                    SettledMarks(
                        ids: settled.map(\.delivery),
                        tenants: settled.map(\.tenant),
                        at: settled.map(\.at),
                        noDevice: settled.map(\.noDevice)
                    ),
                    logger
                )
                changed(rows) { .failed(noDevice: $0.noDevice) }
            }
            for mark in progressMarks {
                for (change, row) in try await self.applyProgress(mark, connection) {
                    effects.changed(
                        change,
                        tenant: mark.tenant,
                        day: row.day,
                        impulse: row.impulse,
                        delivery: mark.delivery.rawValue,
                        user: row.user,
                        at: now
                    )
                }
            }
            var duties = StoreDuties()
            for mark in taps {
                let at = mark.at.unixSeconds
                // A read is a fetch too, if none came first.
                for row in try await connection.rows(
                    """
                    UPDATE deliveries SET fetched_at = \(at)
                    WHERE id = \(mark.delivery.rawValue) AND tenant_id = \(mark.tenant.rawValue)
                        AND fetched_at IS NULL
                    RETURNING report_day, impulse_id, user_id
                    """,
                    logger
                ) {
                    let (day, impulse, user): (String, String, Int64) = (try row.at(0), try row.at(1), try row.at(2))
                    effects.changed(
                        .fetched,
                        tenant: mark.tenant,
                        day: day,
                        impulse: ImpulseID(trusted: impulse),
                        delivery: mark.delivery.rawValue,
                        user: user,
                        at: now
                    )
                }
                guard case .read = mark.kind else { continue }
                for row in try await connection.rows(
                    """
                    UPDATE deliveries SET read_at = \(at)
                    WHERE id = \(mark.delivery.rawValue) AND tenant_id = \(mark.tenant.rawValue)
                        AND read_at IS NULL
                    RETURNING user_id, report_day, impulse_id, pushed_at, pushed_channels
                    """,
                    logger
                ) {
                    let (user, day, impulse): (Int64, String, String) = (try row.at(0), try row.at(1), try row.at(2))
                    let pushedAt: Double? = try row.at(3)
                    let channels = PushChannels(stored: try row.at(4, as: Int?.self), pushed: pushedAt != nil)
                    duties += .ledgerChanged(tenant: mark.tenant, user: UserID(user))
                    effects.changed(
                        .read(pushedAt: pushedAt.map(Date.init(unixSeconds:)), readAt: mark.at, channels: channels),
                        tenant: mark.tenant,
                        day: day,
                        impulse: ImpulseID(trusted: impulse),
                        delivery: mark.delivery.rawValue,
                        user: user,
                        at: now
                    )
                }
            }
            try await self.recordEngagement(effects.tally, connection)
            let users = effects.users
            if !users.isEmpty {
                let names = try await self.usernames(users, connection)
                duties += .events(effects.records(usernames: names))
            }
            try await self.apply(duties, connection)
        }
    }

    public func clearDeliveries(tenant: TenantID, user: UserID) async throws -> Int {
        try await write { [self] connection in
            let count = try await connection.run(
                """
                WITH gone AS (
                    DELETE FROM deliveries WHERE tenant_id = \(tenant.rawValue) AND user_id = \(user.rawValue)
                    RETURNING id
                ), awaiting AS (
                    DELETE FROM unsettled_deliveries WHERE delivery_id IN (SELECT id FROM gone)
                )
                SELECT 1 FROM gone
                """,
                logger
            )
            try await self.apply(.ledgerChanged(tenant: tenant, user: user), connection)
            return count
        }
    }

    static func deliveredImpulse(from row: PostgresRandomAccessRow) throws -> DeliveredImpulse {
        DeliveredImpulse(delivery: try delivery(from: row), impulse: try impulse(from: row, first: 13))
    }

    /// A progress mark (a delivery pushed device by device): its row locked, read and written in the write
    /// transaction, and what it tells the reports and webhooks (nothing when the delivery is settled already). A
    /// delivery it settles leaves `unsettled_deliveries`.
    private func applyProgress(
        _ mark: DeliveryMark,
        _ connection: PostgresConnection
    ) async throws -> [(change: MarkEffects.Change, row: (day: String, impulse: ImpulseID, user: Int64))] {
        guard case .progress(let apnsID, let channels, let devices, let settles) = mark.kind else { return [] }
        guard
            let old = try await connection.rows(
                """
                SELECT pushed_at, pushed_channels, pushed_devices, report_day, impulse_id, user_id FROM deliveries
                WHERE id = \(mark.delivery.rawValue) AND tenant_id = \(mark.tenant.rawValue) AND settled_at IS NULL
                FOR UPDATE
                """,
                logger
            ).first
        else { return [] }
        let next = DeliveryProgress(
            pushedAt: try old.at(0),
            channels: try old.at(1),
            devices: try old.at(2),
            mark: (apnsID, channels, devices, settles),
            at: mark.at.unixSeconds
        )
        try await connection.run(
            """
            UPDATE deliveries SET pushed_at = \(next.pushedAt), apns_id = COALESCE(apns_id, \(apnsID)),
                pushed_channels = \(next.storedChannels), pushed_devices = \(next.storedDevices),
                settled_at = \(next.settledAt)
            WHERE id = \(mark.delivery.rawValue) AND tenant_id = \(mark.tenant.rawValue)
            """,
            logger
        )
        if settles {
            try await connection.run(
                "DELETE FROM unsettled_deliveries WHERE delivery_id = \(mark.delivery.rawValue)",
                logger
            )
        }
        let row = (
            day: try old.at(3) as String, impulse: ImpulseID(trusted: try old.at(4)), user: try old.at(5) as Int64
        )
        return next.changes.map { ($0, row) }
    }

    /// The columns `delivery(from:)` reads, in its order.
    static let deliveryColumns = """
        id, tenant_id, user_id, impulse_id, kind, local_date, assigned_at, pushed_at, apns_id, fetched_at, read_at,
        pushed_channels, pushed_devices
        """

    /// A delivery from a row of `deliveryColumns`.
    static func delivery(from row: PostgresRandomAccessRow) throws -> Delivery {
        let kind: String = try row.at(4)
        let pushedAt: Double? = try row.at(7)
        let fetchedAt: Double? = try row.at(9)
        let readAt: Double? = try row.at(10)
        return Delivery(
            id: DeliveryID(try row.at(0, as: Int64.self)),
            tenant: TenantID(trusted: try row.at(1)),
            user: UserID(try row.at(2, as: Int64.self)),
            impulse: ImpulseID(trusted: try row.at(3)),
            kind: DeliveryKind(rawValue: kind) ?? .manual,
            localDate: try row.at(5),
            assignedAt: Date(unixSeconds: try row.at(6)),
            pushedAt: pushedAt.map(Date.init(unixSeconds:)),
            apnsID: try row.at(8),
            channels: PushChannels(stored: try row.at(11, as: Int?.self), pushed: pushedAt != nil),
            pushedDevices: Delivery.pushedDevices(stored: try row.at(12, as: String?.self)),
            fetchedAt: fetchedAt.map(Date.init(unixSeconds:)),
            readAt: readAt.map(Date.init(unixSeconds:))
        )
    }
}
