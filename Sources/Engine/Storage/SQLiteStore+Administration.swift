import Foundation
import GRDB

extension SQLiteStore {
    public func createOperator(_ account: OperatorAccount, audit: AuditEntry) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO operators (name, password_hash, created_at) VALUES (?, ?, ?)",
                arguments: [account.name, account.passwordHash, account.createdAt.unixSeconds]
            )
            try self.apply(.audited(audit), db)
        }
    }

    public func operatorAccount(name: String) async throws -> OperatorAccount? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM operators WHERE name = ?", arguments: [name]).map(
                Self.operatorAccount
            )
        }
    }

    public func operatorAccounts() async throws -> [OperatorAccount] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM operators ORDER BY name").map(Self.operatorAccount)
        }
    }

    public func createTenant(_ tenant: Tenant, audit: AuditEntry) async throws {
        try await write { db in
            try Self.insertTenant(tenant, db)
            // Other processes may remember the id as unknown: they look again.
            try self.apply(.tenantChanged(tenant.id, audit: audit), db)
        }
    }

    public func updateTenant(_ tenant: Tenant, audit: AuditEntry) async throws {
        try await write { db in
            guard
                let before = try Row.fetchOne(
                    db,
                    sql: "SELECT * FROM tenants WHERE id = ?",
                    arguments: [tenant.id.rawValue]
                )
                .map(Self.tenant(from:))
            else { throw EngineError(.unknownTenant, "unknown tenant \(tenant.id)") }
            try db.execute(
                sql: """
                    UPDATE tenants SET name = ?, default_language = ?, default_time_zone = ?,
                        default_delivery_minute = ?, max_pushes_per_day = ?, apns_topic = ?, push_expiry = ?,
                        suspended = ?, default_quiet_start = ?, default_quiet_end = ?, weekdays = ?,
                        apns_environment = ?, admins_manage_apns = ?, first_delivery = ?, learned_timing = ?
                    WHERE id = ?
                    """,
                arguments: [
                    tenant.name, tenant.defaultLanguage, tenant.defaultTimeZone, tenant.defaultDeliveryTime.minuteOfDay,
                    tenant.maxPushesPerDay, tenant.apnsTopic, tenant.pushExpiry.rawValue, tenant.suspended,
                    tenant.defaultQuietHours?.start.minuteOfDay, tenant.defaultQuietHours?.end.minuteOfDay,
                    tenant.weekdays.mask, tenant.apnsEnvironment?.rawValue, tenant.adminsManageAPNsCredentials,
                    tenant.firstDelivery.rawValue, try StoredForm.encode(tenant.learnedTiming),
                    tenant.id.rawValue,
                ]
            )
            if let change = DueIndexChange(from: before, to: tenant) {
                try db.execute(
                    sql: "UPDATE schedules SET fire_at = ?, local_date = NULL WHERE tenant_id = ?",
                    arguments: [change.fireAt, tenant.id.rawValue]
                )
            }
            try self.apply(.tenantChanged(tenant.id, audit: audit), db)
        }
    }

    public func deleteTenant(_ tenant: TenantID, audit: AuditEntry) async throws -> ErasureReport {
        try await write { db in
            let id = tenant.rawValue
            var report = ErasureReport()
            try db.execute(sql: "DELETE FROM devices WHERE tenant_id = ?", arguments: [id])
            report.devices = db.changesCount
            try db.execute(sql: "DELETE FROM deliveries WHERE tenant_id = ?", arguments: [id])
            report.deliveries = db.changesCount
            try db.execute(sql: "DELETE FROM reminders WHERE tenant_id = ?", arguments: [id])
            report.reminders = db.changesCount
            try db.execute(sql: "DELETE FROM schedules WHERE tenant_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM users WHERE tenant_id = ?", arguments: [id])
            report.users = db.changesCount
            try db.execute(sql: "DELETE FROM impulses WHERE tenant_id = ?", arguments: [id])
            report.impulses = db.changesCount
            try db.execute(sql: "DELETE FROM apns_credentials WHERE tenant_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM fcm_credentials WHERE tenant_id = ?", arguments: [id])
            for table in [
                "engagement_days", "engagement_read_latency", "engagement_channels", "dispatch_days", "webhook_outbox",
            ] {
                try db.execute(sql: "DELETE FROM \(table) WHERE tenant_id = ?", arguments: [id])
            }
            try db.execute(
                sql:
                    "DELETE FROM webhook_attempts WHERE endpoint_id IN (SELECT id FROM webhook_endpoints WHERE tenant_id = ?)",
                arguments: [id]
            )
            try db.execute(sql: "DELETE FROM webhook_endpoints WHERE tenant_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM tenants WHERE id = ?", arguments: [id])
            guard db.changesCount == 1 else { throw EngineError(.unknownTenant, "unknown tenant \(tenant)") }
            // Other processes drop what they cached of the tenant.
            try self.apply(.tenantDeleted(tenant, audit: audit), db)
            return report
        }
    }

    public func createUser(_ user: NewUser, audit: AuditEntry) async throws -> User {
        try await write { db in
            let created = try self.insertUser(user, db, at: Date())
            try self.apply(.usersCreated([created], audit: [audit]), db)
            return created
        }
    }

    public func updateUser(_ user: User, passwordHash: String?, audit: AuditEntry) async throws -> User {
        try await write { db in
            try self.applyUpdate(user, passwordHash: passwordHash, db)
            try self.apply(.userChanged(user, audit: audit), db)
            return try Row.fetchOne(
                db,
                sql: "SELECT * FROM users WHERE id = ?",
                arguments: [user.id.rawValue]
            ).map(Self.user(from:)) ?? user
        }
    }

    public func writeUsers(_ writes: [UserWrite], audit: [AuditEntry]) async throws {
        try await write { db in
            let now = Date()
            var created: [User] = []
            var duties = StoreDuties()
            for write in writes {
                switch write {
                case .create(let new, let enabled, _):
                    var user = try self.insertUser(new, db, at: now)
                    created.append(user)
                    if !enabled {
                        user.enabled = false
                        try self.applyUpdate(user, passwordHash: nil, db)
                        duties += .userChanged(user)
                    }
                case .update(let user, _, let passwordHash):
                    try self.applyUpdate(user, passwordHash: passwordHash, db)
                    duties += .userChanged(user)
                case .unchanged:
                    break
                }
            }
            try self.apply(.usersCreated(created, audit: audit, at: now) + duties, db)
        }
    }

    /// Writes a user's settings (and a new password hash when given) and plans its row again; the caller applies
    /// `StoreDuties.userChanged`.
    private func applyUpdate(_ user: User, passwordHash: String?, _ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE users SET language = ?, life_areas = ?, enabled = ?, is_admin = ?, time_zone = ?,
                    delivery_minute = ?, quiet_start = ?, quiet_end = ?, weekdays = ?,
                    password_hash = COALESCE(?, password_hash)
                WHERE tenant_id = ? AND id = ?
                """,
            arguments: [
                user.language, StoredForm.encodeScores(user.lifeAreas), user.enabled, user.isAdmin,
                user.preferences.timeZone, user.preferences.deliveryTime?.minuteOfDay,
                user.preferences.quietHours?.start.minuteOfDay, user.preferences.quietHours?.end.minuteOfDay,
                user.preferences.weekdays.mask, passwordHash, user.tenant.rawValue, user.id.rawValue,
            ]
        )
        guard db.changesCount == 1 else { throw EngineError(.notFound, "no such user") }
        if passwordHash != nil {
            // A new password ends the account's console sessions, in the same transaction.
            try db.execute(
                sql: "DELETE FROM console_sessions WHERE role = ? AND tenant_id = ? AND name = ?",
                arguments: [AdminActor.Role.tenantAdmin.rawValue, user.tenant.rawValue, user.username]
            )
        }
        // Planned again: a new time, zone or weekday, or an enabled user, moves the next fire time.
        try db.execute(
            sql: "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = ? AND tenant_id = ?",
            arguments: [user.id.rawValue, user.tenant.rawValue]
        )
    }

    public func deleteUser(tenant: TenantID, user: UserID, audit: AuditEntry) async throws -> ErasureReport {
        try await write { db in
            let arguments: StatementArguments = [tenant.rawValue, user.rawValue]
            guard
                let username = try String.fetchOne(
                    db,
                    sql: "SELECT username FROM users WHERE tenant_id = ? AND id = ?",
                    arguments: arguments
                )
            else { throw EngineError(.notFound, "no such user") }
            var report = ErasureReport(users: 1)
            try db.execute(sql: "DELETE FROM devices WHERE tenant_id = ? AND user_id = ?", arguments: arguments)
            report.devices = db.changesCount
            try db.execute(sql: "DELETE FROM deliveries WHERE tenant_id = ? AND user_id = ?", arguments: arguments)
            report.deliveries = db.changesCount
            try db.execute(sql: "DELETE FROM reminders WHERE tenant_id = ? AND user_id = ?", arguments: arguments)
            report.reminders = db.changesCount
            try db.execute(sql: "DELETE FROM schedules WHERE tenant_id = ? AND user_id = ?", arguments: arguments)
            try db.execute(sql: "DELETE FROM users WHERE tenant_id = ? AND id = ?", arguments: arguments)
            try self.apply(.userDeleted(tenant: tenant, user: user, username: username, audit: audit), db)
            return report
        }
    }

    public func userPage(tenant: TenantID, search: String?, after: String?, limit: Int) async throws -> [User] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM users WHERE tenant_id = ? AND username > ?
                        AND (? IS NULL OR instr(lower(username), lower(?)) > 0)
                    ORDER BY username LIMIT ?
                    """,
                arguments: [tenant.rawValue, after ?? "", search, search, max(0, limit)]
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
        try await write { db in
            let counts = try self.upsertImpulses(impulses, tenant: tenant, db)
            try self.apply(.tenantChanged(tenant, audit: audit), db)
            return counts
        }
    }

    public func setImpulseRetired(tenant: TenantID, impulse: ImpulseID, retired: Bool, audit: AuditEntry) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE impulses SET retired = ? WHERE tenant_id = ? AND id = ?",
                arguments: [retired, tenant.rawValue, impulse.rawValue]
            )
            guard db.changesCount == 1 else { throw EngineError(.notFound, "no impulse \(impulse) in \(tenant)") }
            try self.apply(.tenantChanged(tenant, audit: audit), db)
        }
    }

    public func recordDeliveries(_ deliveries: [NewDelivery], audit: AuditEntry) async throws -> [Delivery] {
        try await write { db in
            let insert = try db.cachedStatement(sql: Self.insertDeliverySQL)
            let recorded = try deliveries.compactMap { try self.insert($0, with: insert, db) }
            try self.recordAssigned(recorded, db)
            try self.apply(.deliveriesRecorded(recorded, audit: audit), db)
            return recorded
        }
    }

    public func recordAudit(_ entry: AuditEntry) async throws {
        try await write { db in try self.apply(.audited(entry), db) }
    }

    public func auditEntries(tenant: TenantID?, before: Int64?, limit: Int) async throws -> [AuditEntry] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM audit WHERE id < ? AND (? IS NULL OR tenant_id = ?)
                    ORDER BY id DESC LIMIT ?
                    """,
                arguments: [before ?? Int64.max, tenant?.rawValue, tenant?.rawValue, max(0, limit)]
            ).map(Self.auditEntry(from:))
        }
    }

    static func insertAudit(_ entry: AuditEntry, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO audit (at, actor, role, tenant_id, action, target, request_id)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                entry.at.unixSeconds, entry.actor, entry.role.rawValue, entry.tenant?.rawValue, entry.action,
                entry.target, entry.requestID,
            ]
        )
    }

    static func auditEntry(from row: Row) -> AuditEntry {
        AuditEntry(
            id: row["id"],
            at: Date(unixSeconds: row["at"]),
            actor: row["actor"],
            role: AdminActor.Role(rawValue: row["role"]) ?? .operator,
            tenant: (row["tenant_id"] as String?).map(TenantID.init(trusted:)),
            action: row["action"],
            target: row["target"],
            requestID: row["request_id"]
        )
    }

    static func operatorAccount(from row: Row) -> OperatorAccount {
        OperatorAccount(
            name: row["name"],
            passwordHash: row["password_hash"],
            createdAt: Date(unixSeconds: row["created_at"])
        )
    }
}
