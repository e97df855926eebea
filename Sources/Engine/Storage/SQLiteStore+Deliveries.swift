import Foundation
import GRDB

extension SQLiteStore {
    public func recordDeliveries(_ deliveries: [NewDelivery]) async throws -> [Delivery] {
        try await write { db in
            let insert = try db.cachedStatement(sql: Self.insertDeliverySQL)
            var recorded: [Delivery] = []
            for new in deliveries {
                if let delivery = try self.insert(new, with: insert, db) { recorded.append(delivery) }
            }
            try self.recordAssigned(recorded, db)
            try self.apply(.deliveriesRecorded(recorded), db)
            return recorded
        }
    }

    /// Inserts one assignment with the prepared statement; nil when its daily key already exists. The caller applies
    /// `StoreDuties.deliveriesRecorded` once for everything it inserted.
    func insert(_ new: NewDelivery, with insert: Statement, _ db: Database) throws -> Delivery? {
        let assignedAt = new.assignedAt.unixSeconds
        try insert.execute(arguments: [
            new.tenant.rawValue, new.impulse.rawValue, new.kind.rawValue, new.localDate, assignedAt,
            new.awaitsPush ? nil : assignedAt, new.reportDay, new.user.rawValue, new.tenant.rawValue,
        ])
        guard db.changesCount > 0 else { return nil }
        let id = DeliveryID(db.lastInsertedRowID)
        return Delivery(
            id: id,
            tenant: new.tenant,
            user: new.user,
            impulse: new.impulse,
            kind: new.kind,
            localDate: new.localDate,
            assignedAt: Date(unixSeconds: assignedAt),
            reportDay: new.reportDay
        )
    }

    /// Counts new deliveries as assigned in the reports' daily rows.
    func recordAssigned(_ recorded: [Delivery], _ db: Database) throws {
        var tally = EngagementTally()
        tally.assigned(recorded)
        try recordEngagement(tally, db)
    }

    static let insertDeliverySQL = """
        INSERT INTO deliveries (tenant_id, user_id, impulse_id, kind, local_date, assigned_at, settled_at, report_day)
        SELECT ?, id, ?, ?, ?, ?, ?, ? FROM users WHERE id = ? AND tenant_id = ?
        ON CONFLICT DO NOTHING
        """

    public func deliveredImpulses(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID?,
        before: DeliveryID?,
        limit: Int
    ) async throws -> [DeliveredImpulse] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: Self.deliveredImpulseSelect + """
                     WHERE d.tenant_id = ? AND d.user_id = ? AND d.id > ? AND d.id < ?
                     ORDER BY d.id DESC LIMIT ?
                    """,
                arguments: [
                    tenant.rawValue, user.rawValue, after?.rawValue ?? 0, before?.rawValue ?? Int64.max, max(0, limit),
                ]
            ).map(Self.deliveredImpulse(from:))
        }
    }

    public func deliveredImpulse(tenant: TenantID, user: UserID, impulse: ImpulseID) async throws -> DeliveredImpulse? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: Self.deliveredImpulseSelect + """
                     WHERE d.tenant_id = ? AND d.user_id = ? AND d.impulse_id = ? ORDER BY d.id DESC LIMIT 1
                    """,
                arguments: [tenant.rawValue, user.rawValue, impulse.rawValue]
            ).map(Self.deliveredImpulse(from:))
        }
    }

    public func unreadCount(tenant: TenantID, user: UserID) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT COUNT(*) FROM deliveries WHERE user_id = ? AND tenant_id = ? AND read_at IS NULL",
                arguments: [user.rawValue, tenant.rawValue]
            ) ?? 0
        }
    }

    public func deliveryCounts(tenant: TenantID) async throws -> [UserID: Int] {
        try await read { db in
            var counts: [UserID: Int] = [:]
            for row in try Row.fetchAll(
                db,
                sql: "SELECT user_id, COUNT(*) AS n FROM deliveries WHERE tenant_id = ? GROUP BY user_id",
                arguments: [tenant.rawValue]
            ) {
                counts[UserID(row["user_id"])] = row["n"]
            }
            return counts
        }
    }

    public func applyMarks(_ marks: [DeliveryMark]) async throws {
        guard !marks.isEmpty else { return }
        try await write { db in
            // Each statement returns the rows it changed: only those count in the reports.
            let fetched = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET fetched_at = ? WHERE id = ? AND tenant_id = ? AND fetched_at IS NULL
                    RETURNING \(Self.reportColumns)
                    """
            )
            let read = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET read_at = ? WHERE id = ? AND tenant_id = ? AND read_at IS NULL
                    RETURNING \(Self.reportColumns), pushed_at, pushed_channels
                    """
            )
            let pushed = try db.cachedStatement(
                sql:
                    """
                    UPDATE deliveries SET pushed_at = ?, apns_id = ?, pushed_channels = ?,
                        settled_at = COALESCE(settled_at, ?)
                    WHERE id = ? AND tenant_id = ? AND pushed_at IS NULL
                    RETURNING \(Self.reportColumns), pushed_channels
                    """
            )
            // Numbered as a multi-row statement's row is: (delivery id, tenant, time).
            let settled = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET settled_at = ?3 WHERE id = ?1 AND tenant_id = ?2 AND settled_at IS NULL
                    RETURNING \(Self.reportColumns)
                    """
            )
            var effects = MarkEffects(subscriptions: try self.webhookSubscriptions(db))
            var duties = StoreDuties()
            var noDevice = Set<Int64>()
            var apnsIDs: [Int64: String] = [:]
            var taps: [DeliveryMark] = []
            var progress: [DeliveryMark] = []
            let now = Date()
            /// The rows a statement changed: (tenant, report day, impulse, delivery, user) first.
            func changed(_ statement: Statement, _ change: (Row) -> MarkEffects.Change) throws {
                let rows = try Row.fetchCursor(statement)
                while let row = try rows.next() {
                    effects.changed(
                        change(row),
                        tenant: TenantID(trusted: row[0]),
                        day: row[1],
                        impulse: ImpulseID(trusted: row[2]),
                        delivery: row[3],
                        user: row[4],
                        at: now
                    )
                }
            }
            func pushedRows(_ statement: Statement) throws {
                try changed(statement) {
                    .pushed(apnsID: apnsIDs[$0[3]], channels: PushChannels(stored: $0[5], pushed: true))
                }
            }
            func settledRows(_ statement: Statement) throws {
                try changed(statement) { .failed(noDevice: noDevice.contains($0[3])) }
            }
            // Pushed marks (nearly all of them in a burst) and settled ones (rejected pushes: a third of them with
            // 30% dead tokens) go 64 to a statement; the rest one by one, below.
            var pushedMarks: [(delivery: Int64, tenant: String, at: Double, apnsID: String, channels: Int)] = []
            var settledMarks: [DatabaseValue] = []
            settledMarks.reserveCapacity(3 * Self.marksPerStatement)
            for mark in marks {
                let at = mark.at.unixSeconds
                switch mark.kind {
                case .pushed(let apnsID, let channels):
                    if !effects.subscriptions.isEmpty { apnsIDs[mark.delivery.rawValue] = apnsID }
                    pushedMarks.append((mark.delivery.rawValue, mark.tenant.rawValue, at, apnsID, channels.rawValue))
                    if pushedMarks.count == Self.marksPerStatement {
                        // One flat argument list, filled in place (no array per mark on this path).
                        var values: [DatabaseValue] = []
                        values.reserveCapacity(5 * pushedMarks.count)
                        for mark in pushedMarks {
                            values.append(mark.delivery.databaseValue)
                            values.append(mark.tenant.databaseValue)
                            values.append(mark.at.databaseValue)
                            values.append(mark.apnsID.databaseValue)
                            values.append(mark.channels.databaseValue)
                        }
                        let statement = try db.cachedStatement(sql: Self.pushedMarksSQL)
                        try statement.bindPositionally(values)
                        try pushedRows(statement)
                        pushedMarks.removeAll(keepingCapacity: true)
                    }
                case .settled, .noDevice:
                    if case .noDevice = mark.kind { noDevice.insert(mark.delivery.rawValue) }
                    settledMarks.append(mark.delivery.rawValue.databaseValue)
                    settledMarks.append(mark.tenant.rawValue.databaseValue)
                    settledMarks.append(at.databaseValue)
                    if settledMarks.count == 3 * Self.marksPerStatement {
                        let statement = try db.cachedStatement(sql: Self.settledMarksSQL)
                        try statement.bindPositionally(settledMarks)
                        try settledRows(statement)
                        settledMarks.removeAll(keepingCapacity: true)
                    }
                case .fetched, .read:
                    taps.append(mark)
                case .progress:
                    progress.append(mark)
                }
            }
            for mark in pushedMarks {
                try pushed.setArguments([mark.at, mark.apnsID, mark.channels, mark.at, mark.delivery, mark.tenant])
                try pushedRows(pushed)
            }
            for start in stride(from: 0, to: settledMarks.count, by: 3) {
                try settled.bindPositionally(Array(settledMarks[start..<start + 3]))
                try settledRows(settled)
            }
            for mark in progress {
                for (change, row) in try self.applyProgress(mark, db) {
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
            // A user's taps after the pushes (as PostgreSQL's store applies them): a read's time from its push
            // is known when both are in one batch.
            for mark in taps {
                let at = mark.at.unixSeconds
                // A read is a fetch too, if none came first.
                try fetched.setArguments([at, mark.delivery.rawValue, mark.tenant.rawValue])
                try changed(fetched) { _ in .fetched }
                guard case .read = mark.kind else { continue }
                try read.setArguments([at, mark.delivery.rawValue, mark.tenant.rawValue])
                var reader: Int64?
                try changed(read) { row in
                    reader = row[4]
                    let pushedAt = (row[5] as Double?).map(Date.init(unixSeconds:))
                    return .read(
                        pushedAt: pushedAt,
                        readAt: mark.at,
                        channels: PushChannels(stored: row[6], pushed: pushedAt != nil)
                    )
                }
                if let reader { duties += .ledgerChanged(tenant: mark.tenant, user: UserID(reader)) }
            }
            try self.recordEngagement(effects.tally, db)
            let users = effects.users
            if !users.isEmpty {
                duties += .events(effects.records(usernames: try self.usernames(users, db)))
            }
            try self.apply(duties, db)
        }
    }

    /// A progress mark (a delivery pushed device by device): its row read and written in the write transaction,
    /// and what it tells the reports and webhooks (nothing when the delivery is settled already).
    private func applyProgress(
        _ mark: DeliveryMark,
        _ db: Database
    ) throws -> [(change: MarkEffects.Change, row: (day: String, impulse: ImpulseID, user: Int64))] {
        guard case .progress(let apnsID, let channels, let devices, let settles) = mark.kind else { return [] }
        guard
            let old = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT pushed_at, pushed_channels, pushed_devices, report_day, impulse_id, user_id
                        FROM deliveries WHERE id = ? AND tenant_id = ? AND settled_at IS NULL
                        """
                ),
                arguments: [mark.delivery.rawValue, mark.tenant.rawValue]
            )
        else { return [] }
        let next = DeliveryProgress(
            pushedAt: old[0],
            channels: old[1],
            devices: old[2],
            mark: (apnsID, channels, devices, settles),
            at: mark.at.unixSeconds
        )
        try db.cachedStatement(
            sql: """
                UPDATE deliveries SET pushed_at = ?, apns_id = COALESCE(apns_id, ?), pushed_channels = ?,
                    pushed_devices = ?, settled_at = ?
                WHERE id = ? AND tenant_id = ? AND settled_at IS NULL
                """
        ).execute(arguments: [
            next.pushedAt, apnsID, next.storedChannels, next.storedDevices, next.settledAt, mark.delivery.rawValue,
            mark.tenant.rawValue,
        ])
        let row = (day: old[3] as String, impulse: ImpulseID(trusted: old[4]), user: old[5] as Int64)
        return next.changes.map { ($0, row) }
    }

    /// What a changed delivery tells the reports and webhooks, first in each `RETURNING`: (tenant, report day,
    /// impulse, delivery, user).
    static let reportColumns = "tenant_id, report_day, impulse_id, id, user_id"

    /// Pushed or settled marks per multi-row statement.
    static let marksPerStatement = 64

    /// `marksPerStatement` settled marks: (delivery id, tenant, time) each. A delivery already settled keeps its
    /// first time, as with the one-row statement.
    static let settledMarksSQL = """
        UPDATE deliveries SET settled_at = v.column3
        FROM (VALUES \(Array(repeating: "(?,?,?)", count: marksPerStatement).joined(separator: ","))) AS v
        WHERE deliveries.id = v.column1 AND deliveries.tenant_id = v.column2 AND deliveries.settled_at IS NULL
        RETURNING deliveries.tenant_id, deliveries.report_day, deliveries.impulse_id, deliveries.id, deliveries.user_id
        """

    /// `marksPerStatement` pushed marks: (delivery id, tenant, time, apns-id, channels) each. A delivery already
    /// marked pushed keeps its first mark, as with the one-row statement.
    static let pushedMarksSQL = """
        UPDATE deliveries SET pushed_at = v.column3, apns_id = v.column4, pushed_channels = v.column5,
            settled_at = COALESCE(deliveries.settled_at, v.column3)
        FROM (VALUES \(Array(repeating: "(?,?,?,?,?)", count: marksPerStatement).joined(separator: ","))) AS v
        WHERE deliveries.id = v.column1 AND deliveries.tenant_id = v.column2 AND deliveries.pushed_at IS NULL
        RETURNING deliveries.tenant_id, deliveries.report_day, deliveries.impulse_id, deliveries.id, deliveries.user_id,
            deliveries.pushed_channels
        """

    public func clearDeliveries(tenant: TenantID, user: UserID) async throws -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM deliveries WHERE tenant_id = ? AND user_id = ?",
                arguments: [tenant.rawValue, user.rawValue]
            )
            let count = db.changesCount
            try self.apply(.ledgerChanged(tenant: tenant, user: user), db)
            return count
        }
    }

    static let deliveredImpulseSelect = """
        SELECT d.id AS d_id, d.tenant_id AS d_tenant_id, d.user_id, d.impulse_id, d.kind, d.local_date, d.assigned_at,
            d.pushed_at, d.apns_id, d.pushed_channels, d.fetched_at, d.read_at, i.*
        FROM deliveries d JOIN impulses i ON i.tenant_id = d.tenant_id AND i.id = d.impulse_id
        """

    static func deliveredImpulse(from row: Row) throws -> DeliveredImpulse {
        // The join aliases the delivery's id and tenant: the impulse's columns carry the same names.
        DeliveredImpulse(
            delivery: delivery(from: row, id: "d_id", tenant: "d_tenant_id"),
            impulse: try impulse(from: row)
        )
    }

    /// A `deliveries` row; `id` and `tenant` name its id and tenant columns (aliased in joins).
    static func delivery(from row: Row, id: String = "id", tenant: String = "tenant_id") -> Delivery {
        let kind: String = row["kind"]
        let pushedAt: Double? = row["pushed_at"]
        let fetchedAt: Double? = row["fetched_at"]
        let readAt: Double? = row["read_at"]
        return Delivery(
            id: DeliveryID(row[id]),
            tenant: TenantID(trusted: row[tenant]),
            user: UserID(row["user_id"]),
            impulse: ImpulseID(trusted: row["impulse_id"]),
            kind: DeliveryKind(rawValue: kind) ?? .manual,
            localDate: row["local_date"],
            assignedAt: Date(unixSeconds: row["assigned_at"]),
            pushedAt: pushedAt.map(Date.init(unixSeconds:)),
            apnsID: row["apns_id"],
            channels: PushChannels(stored: row["pushed_channels"], pushed: pushedAt != nil),
            pushedDevices: Delivery.pushedDevices(stored: row["pushed_devices"]),
            fetchedAt: fetchedAt.map(Date.init(unixSeconds:)),
            readAt: readAt.map(Date.init(unixSeconds:))
        )
    }
}
