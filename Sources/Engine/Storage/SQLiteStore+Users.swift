import Foundation
import GRDB

extension SQLiteStore {
    public func createTenant(_ tenant: Tenant) async throws {
        try await write { db in
            try Self.insertTenant(tenant, db)
            try self.apply(.tenantChanged(tenant.id), db)
        }
    }

    static func insertTenant(_ tenant: Tenant, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO tenants (id, name, default_language, default_time_zone, default_delivery_minute,
                    max_pushes_per_day, apns_topic, created_at, push_expiry, suspended, default_quiet_start,
                    default_quiet_end, weekdays, apns_environment, admins_manage_apns, first_delivery, learned_timing)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                tenant.id.rawValue, tenant.name, tenant.defaultLanguage, tenant.defaultTimeZone,
                tenant.defaultDeliveryTime.minuteOfDay, tenant.maxPushesPerDay, tenant.apnsTopic,
                tenant.createdAt.unixSeconds, tenant.pushExpiry.rawValue, tenant.suspended,
                tenant.defaultQuietHours?.start.minuteOfDay, tenant.defaultQuietHours?.end.minuteOfDay,
                tenant.weekdays.mask, tenant.apnsEnvironment?.rawValue, tenant.adminsManageAPNsCredentials,
                tenant.firstDelivery.rawValue, try StoredForm.encode(tenant.learnedTiming),
            ]
        )
    }

    public func tenant(_ id: TenantID) async throws -> Tenant? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM tenants WHERE id = ?", arguments: [id.rawValue]).map(
                Self.tenant(from:)
            )
        }
    }

    public func setPushExpiry(tenant: TenantID, _ expiry: PushExpiry) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE tenants SET push_expiry = ? WHERE id = ?",
                arguments: [expiry.rawValue, tenant.rawValue]
            )
            guard db.changesCount == 1 else { throw EngineError(.unknownTenant, "unknown tenant \(tenant)") }
            try self.apply(.tenantChanged(tenant), db)
        }
    }

    public func tenants() async throws -> [Tenant] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM tenants ORDER BY id").map(Self.tenant(from:))
        }
    }

    public func createUser(_ new: NewUser) async throws -> User {
        try await write { db in try self.insertUser(new, db, at: Date()) }
    }

    public func createUsers(_ users: [NewUser]) async throws -> [User] {
        guard !users.isEmpty else { return [] }
        return try await write { db in
            let now = Date()
            return try users.map { try self.insertUser($0, db, at: now) }
        }
    }

    /// Inserts a user and its row of the due index (a fire time of 0 with no date asks the scheduler to plan it).
    func insertUser(_ new: NewUser, _ db: Database, at now: Date) throws -> User {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO users (tenant_id, username, password_hash, language, life_areas, enabled, time_zone,
                    delivery_minute, quiet_start, quiet_end, weekdays, created_at, is_admin)
                VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)
                """
        )
        try insert.execute(arguments: [
            new.tenant.rawValue, new.username, new.passwordHash, new.language,
            StoredForm.encodeScores(new.lifeAreas), new.preferences.timeZone,
            new.preferences.deliveryTime?.minuteOfDay, new.preferences.quietHours?.start.minuteOfDay,
            new.preferences.quietHours?.end.minuteOfDay, new.preferences.weekdays.mask,
            now.unixSeconds, new.isAdmin,
        ])
        let id = db.lastInsertedRowID
        let schedule = try db.cachedStatement(
            sql: "INSERT INTO schedules (user_id, tenant_id, fire_at, not_before) VALUES (?, ?, 0, ?)"
        )
        try schedule.execute(arguments: [id, new.tenant.rawValue, new.startsAt?.unixSeconds ?? 0])
        return User(
            id: UserID(id),
            tenant: new.tenant,
            username: new.username,
            passwordHash: new.passwordHash,
            language: new.language,
            lifeAreas: new.lifeAreas,
            enabled: true,
            preferences: new.preferences,
            isAdmin: new.isAdmin,
            createdAt: Date(unixSeconds: now.unixSeconds)
        )
    }

    public func user(tenant: TenantID, username: String) async throws -> User? {
        // Through the index on the folded name (``UsernameMatch``): SQLite's lower() folds ASCII only.
        let candidates = try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM users WHERE tenant_id = ? AND lower(username) = ?
                    ORDER BY username = ? DESC, id LIMIT 2
                    """,
                arguments: [tenant.rawValue, UsernameMatch.key(username), username]
            ).map(Self.user(from:))
        }
        return UsernameMatch.pick(candidates, typed: username)
    }

    public func user(tenant: TenantID, id: UserID) async throws -> User? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM users WHERE tenant_id = ? AND id = ?",
                arguments: [tenant.rawValue, id.rawValue]
            ).map(Self.user(from:))
        }
    }

    public func users(tenant: TenantID) async throws -> [User] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM users WHERE tenant_id = ? ORDER BY username",
                arguments: [tenant.rawValue]
            )
            .map(Self.user(from:))
        }
    }

    public func setPassword(tenant: TenantID, username: String, passwordHash: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE users SET password_hash = ? WHERE tenant_id = ? AND username = ?",
                arguments: [passwordHash, tenant.rawValue, username]
            )
            guard db.changesCount > 0 else { return false }
            try self.apply(.credentialsChanged(tenant: tenant, username: username), db)
            return true
        }
    }

    public func setEnabled(tenant: TenantID, username: String, enabled: Bool) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE users SET enabled = ? WHERE tenant_id = ? AND username = ?",
                arguments: [enabled, tenant.rawValue, username]
            )
            guard db.changesCount > 0 else { return false }
            // Re-enabling plans the row again; disabling lets the scheduler park it when it comes due.
            if enabled {
                try db.execute(
                    sql: """
                        UPDATE schedules SET fire_at = 0, local_date = NULL
                        WHERE user_id = (SELECT id FROM users WHERE tenant_id = ? AND username = ?)
                        """,
                    arguments: [tenant.rawValue, username]
                )
            }
            try self.apply(.credentialsChanged(tenant: tenant, username: username), db)
            return true
        }
    }

    public func setPreferences(
        tenant: TenantID,
        user: UserID,
        language: String?,
        preferences: DeliveryPreferences
    ) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE users SET language = ?, time_zone = ?, delivery_minute = ?, quiet_start = ?, quiet_end = ?,
                        weekdays = ? WHERE tenant_id = ? AND id = ?
                    """,
                arguments: [
                    language, preferences.timeZone, preferences.deliveryTime?.minuteOfDay,
                    preferences.quietHours?.start.minuteOfDay, preferences.quietHours?.end.minuteOfDay,
                    preferences.weekdays.mask, tenant.rawValue, user.rawValue,
                ]
            )
            guard db.changesCount > 0 else { throw EngineError(.notFound, "no such user") }
            try db.execute(
                sql: "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = ? AND tenant_id = ?",
                arguments: [user.rawValue, tenant.rawValue]
            )
            try self.apply(.profileChanged(tenant: tenant, user: user), db)
        }
    }

    public func setLifeAreas(tenant: TenantID, user: UserID, scores: LifeAreaScores) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE users SET life_areas = ? WHERE tenant_id = ? AND id = ?",
                arguments: [StoredForm.encodeScores(scores), tenant.rawValue, user.rawValue]
            )
            guard db.changesCount > 0 else { throw EngineError(.notFound, "no such user") }
            try self.apply(.profileChanged(tenant: tenant, user: user), db)
        }
    }

    static func tenant(from row: Row) throws -> Tenant {
        try Tenant(
            id: TenantID(trusted: row["id"]),
            name: row["name"],
            defaultLanguage: row["default_language"],
            defaultTimeZone: row["default_time_zone"],
            defaultDeliveryTime: LocalTime(minuteOfDay: row["default_delivery_minute"]),
            maxPushesPerDay: row["max_pushes_per_day"],
            defaultQuietHours: try StoredForm.quietHours(
                start: row["default_quiet_start"],
                end: row["default_quiet_end"]
            ),
            weekdays: StoredForm.weekdays(mask: row["weekdays"]),
            apnsEnvironment: (row["apns_environment"] as String?).flatMap(APNsEnvironment.init(rawValue:)),
            apnsTopic: row["apns_topic"],
            pushExpiry: (row["push_expiry"] as String?).flatMap(PushExpiry.init(rawValue:)) ?? .endOfDay,
            suspended: row["suspended"],
            adminsManageAPNsCredentials: row["admins_manage_apns"],
            firstDelivery: (row["first_delivery"] as String?).flatMap(FirstDelivery.init(rawValue:))
                ?? .nextDeliveryTime,
            learnedTiming: StoredForm.learnedTiming(row["learned_timing"]),
            createdAt: Date(unixSeconds: row["created_at"])
        )
    }

    static func user(from row: Row) throws -> User {
        let preferences = try preferences(from: row)
        return User(
            id: UserID(row["id"]),
            tenant: TenantID(trusted: row["tenant_id"]),
            username: row["username"],
            passwordHash: row["password_hash"],
            language: row["language"],
            lifeAreas: try StoredForm.decodeScores(row["life_areas"]),
            enabled: row["enabled"],
            preferences: preferences,
            isAdmin: row["is_admin"],
            createdAt: Date(unixSeconds: row["created_at"])
        )
    }

    /// The delivery preference columns of a `users` row.
    static func preferences(from row: Row) throws -> DeliveryPreferences {
        try StoredForm.preferences(
            timeZone: row["time_zone"],
            deliveryMinute: row["delivery_minute"],
            quietStart: row["quiet_start"],
            quietEnd: row["quiet_end"],
            weekdays: row["weekdays"]
        )
    }
}
