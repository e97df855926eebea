import Foundation
import PostgresNIO

extension PostgresStore {
    public func createReminder(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        at fireAt: Date,
        maximumPending: Int
    ) async throws -> Reminder {
        try await write { [self] connection in
            // The user's schedule row is locked first: two requests of the same user on two nodes count in turn.
            try await connection.run(
                "SELECT 1 FROM schedules WHERE user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue) FOR UPDATE",
                logger
            )
            let pending =
                try await connection.rows(
                    """
                    SELECT count(*) FROM reminders WHERE user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue)
                    """,
                    logger
                ).first?.at(0, as: Int.self) ?? 0
            guard pending < maximumPending else {
                throw EngineError(.conflict, "at most \(maximumPending) reminders may be pending")
            }
            let now = Date().unixSeconds
            let id = try await connection.rows(
                """
                INSERT INTO reminders (tenant_id, user_id, impulse_id, fire_at, created_at)
                VALUES (\(tenant.rawValue), \(user.rawValue), \(impulse.rawValue), \(fireAt.unixSeconds), \(now))
                RETURNING id
                """,
                logger
            ).first?.at(0, as: Int64.self)
            guard let id else { throw EngineError(.storage, "the reminder was not inserted") }
            return Reminder(
                id: id,
                tenant: tenant,
                user: user,
                impulse: impulse,
                fireAt: Date(unixSeconds: fireAt.unixSeconds),
                createdAt: Date(unixSeconds: now)
            )
        }
    }

    static let reminderColumns = "id, tenant_id, user_id, impulse_id, fire_at, created_at"

    public func reminders(tenant: TenantID, user: UserID) async throws -> [Reminder] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.reminderColumns) FROM reminders
                WHERE user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue) ORDER BY fire_at, id
                """,
                logger
            ).map(Self.reminder(from:))
        }
    }

    public func deleteReminder(tenant: TenantID, user: UserID, id: Int64) async throws -> Bool {
        try await write { [self] connection in
            try await connection.run(
                """
                DELETE FROM reminders WHERE id = \(id) AND user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue)
                RETURNING 1
                """,
                logger
            ) > 0
        }
    }

    public func dueReminders(notAfter now: Date, limit: Int) async throws -> [Reminder] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.reminderColumns) FROM reminders
                WHERE fire_at <= \(now.unixSeconds)
                    AND tenant_id NOT IN (SELECT id FROM tenants WHERE suspended)
                ORDER BY fire_at, id LIMIT \(max(0, limit))
                """,
                logger
            ).map(Self.reminder(from:))
        }
    }

    /// Deletes the reminders and records a delivery for each one this transaction deleted: a reminder another
    /// node fired first (or a retry of this batch) is gone, and records nothing.
    public func fireReminders(
        _ reminders: [Reminder],
        at now: Date,
        reportDays: [TenantID: String]
    ) async throws -> [Delivery] {
        guard !reminders.isEmpty else { return [] }
        return try await write { [self] connection in
            let deleted = Set(
                try await connection.rows(
                    "DELETE FROM reminders WHERE id = ANY(\(reminders.map(\.id))) RETURNING id",
                    logger
                ).map { try $0.at(0, as: Int64.self) }
            )
            let fired = reminders.filter { deleted.contains($0.id) }.map {
                NewDelivery(
                    tenant: $0.tenant,
                    user: $0.user,
                    impulse: $0.impulse,
                    kind: .reminder,
                    assignedAt: now,
                    awaitsPush: true,
                    reportDay: reportDays[$0.tenant]
                )
            }
            let recorded = try await self.insert(fired, connection)
            try await self.recordAssigned(recorded, connection)
            try await self.apply(.deliveriesRecorded(recorded), connection)
            return recorded
        }
    }

    static func reminder(from row: PostgresRandomAccessRow) throws -> Reminder {
        Reminder(
            id: try row.at(0),
            tenant: TenantID(trusted: try row.at(1)),
            user: UserID(try row.at(2, as: Int64.self)),
            impulse: ImpulseID(trusted: try row.at(3)),
            fireAt: Date(unixSeconds: try row.at(4)),
            createdAt: Date(unixSeconds: try row.at(5))
        )
    }
}
