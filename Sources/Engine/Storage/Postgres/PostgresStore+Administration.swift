import Foundation
import PostgresNIO

extension PostgresStore {
    public func createOperator(_ account: OperatorAccount, audit: AuditEntry) async throws {
        try await write { [self] connection in
            try await connection.run(
                """
                INSERT INTO operators (name, password_hash, created_at)
                VALUES (\(account.name), \(account.passwordHash), \(account.createdAt.unixSeconds))
                """,
                logger
            )
            try await self.apply(.audited(audit), connection)
        }
    }

    public func operatorAccount(name: String) async throws -> OperatorAccount? {
        try await read { [self] connection in
            try await connection.rows(
                "SELECT name, password_hash, created_at FROM operators WHERE name = \(name)",
                logger
            ).first.map(Self.operatorAccount(from:))
        }
    }

    public func operatorAccounts() async throws -> [OperatorAccount] {
        try await read { [self] connection in
            try await connection.rows(
                "SELECT name, password_hash, created_at FROM operators ORDER BY name COLLATE \"C\"",
                logger
            ).map(Self.operatorAccount(from:))
        }
    }

    public func createTenant(_ tenant: Tenant, audit: AuditEntry) async throws {
        try await write { [self] connection in
            try await self.insertTenant(tenant, connection)
            // Other nodes may remember the id as unknown: they look again when the change's NOTIFY arrives.
            try await self.apply(.tenantChanged(tenant.id, audit: audit), connection)
        }
    }

    public func updateTenant(_ tenant: Tenant, audit: AuditEntry) async throws {
        try await write { [self] connection in
            guard
                let before = try await connection.rows(
                    "SELECT \(unescaped: Self.tenantColumns) FROM tenants WHERE id = \(tenant.id.rawValue) FOR UPDATE",
                    logger
                ).first.map(Self.tenant(from:))
            else { throw EngineError(.unknownTenant, "unknown tenant \(tenant.id)") }
            try await connection.run(
                """
                UPDATE tenants SET name = \(tenant.name), default_language = \(tenant.defaultLanguage),
                    default_time_zone = \(tenant.defaultTimeZone),
                    default_delivery_minute = \(tenant.defaultDeliveryTime.minuteOfDay),
                    max_pushes_per_day = \(tenant.maxPushesPerDay), apns_topic = \(tenant.apnsTopic),
                    push_expiry = \(tenant.pushExpiry.rawValue), suspended = \(tenant.suspended),
                    default_quiet_start = \(tenant.defaultQuietHours?.start.minuteOfDay),
                    default_quiet_end = \(tenant.defaultQuietHours?.end.minuteOfDay),
                    weekdays = \(tenant.weekdays.mask), apns_environment = \(tenant.apnsEnvironment?.rawValue),
                    admins_manage_apns = \(tenant.adminsManageAPNsCredentials),
                    first_delivery = \(tenant.firstDelivery.rawValue),
                    learned_timing = \(try StoredForm.encode(tenant.learnedTiming))
                WHERE id = \(tenant.id.rawValue)
                """,
                logger
            )
            if let change = DueIndexChange(from: before, to: tenant) {
                try await connection.run(
                    """
                    UPDATE schedules SET fire_at = \(change.fireAt), local_date = NULL
                    WHERE tenant_id = \(tenant.id.rawValue)
                    """,
                    logger
                )
            }
            try await self.apply(.tenantChanged(tenant.id, audit: audit), connection)
        }
    }

    public func deleteTenant(_ tenant: TenantID, audit: AuditEntry) async throws -> ErasureReport {
        try await write { [self] connection in
            let id = tenant.rawValue
            var report = ErasureReport()
            report.devices = try await connection.run("DELETE FROM devices WHERE tenant_id = \(id) RETURNING 1", logger)
            report.deliveries = try await self.deleteDeliveries(connection, tenant: tenant, user: nil)
            report.reminders = try await connection.run(
                "DELETE FROM reminders WHERE tenant_id = \(id) RETURNING 1",
                logger
            )
            try await connection.run("DELETE FROM schedules WHERE tenant_id = \(id)", logger)
            report.users = try await connection.run("DELETE FROM users WHERE tenant_id = \(id) RETURNING 1", logger)
            report.impulses = try await connection.run(
                "DELETE FROM impulses WHERE tenant_id = \(id) RETURNING 1",
                logger
            )
            try await connection.run("DELETE FROM apns_credentials WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM fcm_credentials WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM engagement_days WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM engagement_read_latency WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM engagement_channels WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM dispatch_days WHERE tenant_id = \(id)", logger)
            try await connection.run("DELETE FROM webhook_endpoints WHERE tenant_id = \(id)", logger)
            let deleted = try await connection.run("DELETE FROM tenants WHERE id = \(id) RETURNING 1", logger)
            guard deleted == 1 else { throw EngineError(.unknownTenant, "unknown tenant \(tenant)") }
            try await self.apply(.tenantDeleted(tenant, audit: audit), connection)
            return report
        }
    }

    /// Deletes the tenant's (or one user's) deliveries with their rows in `unsettled_deliveries`; returns how many.
    private func deleteDeliveries(_ connection: PostgresConnection, tenant: TenantID, user: UserID?) async throws -> Int
    {
        try await connection.rows(
            """
            WITH gone AS (
                DELETE FROM deliveries WHERE tenant_id = \(tenant.rawValue)
                    AND (\(user?.rawValue)::bigint IS NULL OR user_id = \(user?.rawValue))
                RETURNING id
            ), awaiting AS (
                DELETE FROM unsettled_deliveries WHERE delivery_id IN (SELECT id FROM gone)
            )
            SELECT count(*) FROM gone
            """,
            logger
        ).first?.at(0, as: Int.self) ?? 0
    }

    public func createUser(_ user: NewUser, audit: AuditEntry) async throws -> User {
        try await write { [self] connection in
            let created = try await self.insertUsers([user], connection)[0]
            try await self.apply(.usersCreated([created], audit: [audit]), connection)
            return created
        }
    }

    public func updateUser(_ user: User, passwordHash: String?, audit: AuditEntry) async throws -> User {
        try await write { [self] connection in
            let updated = try await self.applyUpdate(user, passwordHash: passwordHash, connection)
            try await self.apply(.userChanged(user, audit: audit), connection)
            return updated
        }
    }

    public func writeUsers(_ writes: [UserWrite], audit: [AuditEntry]) async throws {
        try await write { [self] connection in
            let now = Date()
            var created: [User] = []
            var duties = StoreDuties()
            for write in writes {
                switch write {
                case .create(let new, let enabled, _):
                    var user = try await self.insertUsers([new], connection)[0]
                    created.append(user)
                    if !enabled {
                        user.enabled = false
                        _ = try await self.applyUpdate(user, passwordHash: nil, connection)
                        duties += .userChanged(user)
                    }
                case .update(let user, _, let passwordHash):
                    _ = try await self.applyUpdate(user, passwordHash: passwordHash, connection)
                    duties += .userChanged(user)
                case .unchanged:
                    break
                }
            }
            try await self.apply(.usersCreated(created, audit: audit, at: now) + duties, connection)
        }
    }

    /// Writes a user's settings (and a new password hash when given) and plans its row again; the caller applies
    /// `StoreDuties.userChanged`.
    private func applyUpdate(
        _ user: User,
        passwordHash: String?,
        _ connection: PostgresConnection
    ) async throws -> User {
        let preferences = user.preferences
        guard
            let updated = try await connection.rows(
                """
                UPDATE users SET language = \(user.language), life_areas = \(StoredForm.encodeScores(user.lifeAreas)),
                    enabled = \(user.enabled), is_admin = \(user.isAdmin), time_zone = \(preferences.timeZone),
                    delivery_minute = \(preferences.deliveryTime?.minuteOfDay),
                    quiet_start = \(preferences.quietHours?.start.minuteOfDay),
                    quiet_end = \(preferences.quietHours?.end.minuteOfDay), weekdays = \(preferences.weekdays.mask),
                    password_hash = COALESCE(\(passwordHash), password_hash)
                WHERE tenant_id = \(user.tenant.rawValue) AND id = \(user.id.rawValue)
                RETURNING \(unescaped: Self.userColumns)
                """,
                logger
            ).first.map(Self.user(from:))
        else { throw EngineError(.notFound, "no such user") }
        if passwordHash != nil {
            // A new password ends the account's console sessions, in the same transaction.
            try await connection.run(
                """
                DELETE FROM console_sessions WHERE role = \(AdminActor.Role.tenantAdmin.rawValue)
                    AND tenant_id = \(user.tenant.rawValue) AND name = \(user.username)
                """,
                logger
            )
        }
        // Planned again: a new time, zone or weekday, or an enabled user, moves the next fire time.
        try await connection.run(
            "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = \(user.id.rawValue)",
            logger
        )
        return updated
    }

    public func deleteUser(tenant: TenantID, user: UserID, audit: AuditEntry) async throws -> ErasureReport {
        try await write { [self] connection in
            guard
                let username = try await connection.rows(
                    "SELECT username FROM users WHERE tenant_id = \(tenant.rawValue) AND id = \(user.rawValue)",
                    logger
                ).first?.at(0, as: String.self)
            else { throw EngineError(.notFound, "no such user") }
            let (t, u) = (tenant.rawValue, user.rawValue)
            var report = ErasureReport(users: 1)
            report.devices = try await connection.run(
                "DELETE FROM devices WHERE tenant_id = \(t) AND user_id = \(u) RETURNING 1",
                logger
            )
            report.deliveries = try await self.deleteDeliveries(connection, tenant: tenant, user: user)
            report.reminders = try await connection.run(
                "DELETE FROM reminders WHERE tenant_id = \(t) AND user_id = \(u) RETURNING 1",
                logger
            )
            try await connection.run("DELETE FROM schedules WHERE tenant_id = \(t) AND user_id = \(u)", logger)
            try await connection.run("DELETE FROM users WHERE tenant_id = \(t) AND id = \(u)", logger)
            try await self.apply(
                .userDeleted(tenant: tenant, user: user, username: username, audit: audit),
                connection
            )
            return report
        }
    }

    public func userPage(tenant: TenantID, search: String?, after: String?, limit: Int) async throws -> [User] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.userColumns) FROM users
                WHERE tenant_id = \(tenant.rawValue) AND username COLLATE "C" > \(after ?? "")
                    AND (\(search)::text IS NULL OR strpos(lower(username), lower(\(search))) > 0)
                ORDER BY username COLLATE "C" LIMIT \(max(0, limit))
                """,
                logger
            ).map(Self.user(from:))
        }
    }

    public func importImpulses(
        _ impulses: [Impulse],
        tenant: TenantID,
        audit: AuditEntry
    ) async throws -> (
        inserted: Int, updated: Int
    ) {
        try await write { [self] connection in
            let counts = try await self.upsertImpulses(impulses, tenant: tenant, connection)
            try await self.apply(.tenantChanged(tenant, audit: audit), connection)
            return counts
        }
    }

    public func setImpulseRetired(tenant: TenantID, impulse: ImpulseID, retired: Bool, audit: AuditEntry) async throws {
        try await write { [self] connection in
            let changed = try await connection.run(
                """
                UPDATE impulses SET retired = \(retired)
                WHERE tenant_id = \(tenant.rawValue) AND id = \(impulse.rawValue) RETURNING 1
                """,
                logger
            )
            guard changed == 1 else { throw EngineError(.notFound, "no impulse \(impulse) in \(tenant)") }
            try await self.apply(.tenantChanged(tenant, audit: audit), connection)
        }
    }

    public func recordDeliveries(_ deliveries: [NewDelivery], audit: AuditEntry) async throws -> [Delivery] {
        try await write { [self] connection in
            let recorded = try await self.insert(deliveries, connection)
            try await self.recordAssigned(recorded, connection)
            try await self.apply(.deliveriesRecorded(recorded, audit: audit), connection)
            return recorded
        }
    }

    public func recordAudit(_ entry: AuditEntry) async throws {
        try await write { [self] connection in try await self.apply(.audited(entry), connection) }
    }

    public func auditEntries(tenant: TenantID?, before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT id, at, actor, role, tenant_id, action, target, request_id FROM audit
                WHERE id < \(before ?? Int64.max) AND (\(tenant?.rawValue)::text IS NULL OR tenant_id = \(tenant?.rawValue))
                ORDER BY id DESC LIMIT \(max(0, limit))
                """,
                logger
            ).map(Self.auditEntry(from:))
        }
    }

    func insertAudit(_ entry: AuditEntry, _ connection: PostgresConnection) async throws {
        try await connection.run(
            """
            INSERT INTO audit (at, actor, role, tenant_id, action, target, request_id)
            VALUES (\(entry.at.unixSeconds), \(entry.actor), \(entry.role.rawValue), \(entry.tenant?.rawValue),
                \(entry.action), \(entry.target), \(entry.requestID))
            """,
            logger
        )
    }

    static func auditEntry(from row: PostgresRandomAccessRow) throws -> AuditEntry {
        AuditEntry(
            id: try row.at(0, as: Int64.self),
            at: Date(unixSeconds: try row.at(1, as: Double.self)),
            actor: try row.at(2, as: String.self),
            role: AdminActor.Role(rawValue: try row.at(3, as: String.self)) ?? .operator,
            tenant: (try row.at(4, as: String?.self)).map(TenantID.init(trusted:)),
            action: try row.at(5, as: String.self),
            target: try row.at(6, as: String.self),
            requestID: try row.at(7, as: String?.self)
        )
    }

    static func operatorAccount(from row: PostgresRandomAccessRow) throws -> OperatorAccount {
        OperatorAccount(
            name: try row.at(0, as: String.self),
            passwordHash: try row.at(1, as: String.self),
            createdAt: Date(unixSeconds: try row.at(2, as: Double.self))
        )
    }
}
