import Foundation
import PostgresNIO

extension PostgresStore {
    public func createTenant(_ tenant: Tenant) async throws {
        try await write { [self] connection in
            try await self.insertTenant(tenant, connection)
            try await self.apply(.tenantChanged(tenant.id), connection)
        }
    }

    func insertTenant(_ tenant: Tenant, _ connection: PostgresConnection) async throws {
        try await connection.run(
            """
            INSERT INTO tenants (id, name, default_language, default_time_zone, default_delivery_minute,
                max_pushes_per_day, apns_topic, created_at, push_expiry, suspended, default_quiet_start,
                default_quiet_end, weekdays, apns_environment, admins_manage_apns, first_delivery, learned_timing)
            VALUES (\(tenant.id.rawValue), \(tenant.name), \(tenant.defaultLanguage), \(tenant.defaultTimeZone),
                \(tenant.defaultDeliveryTime.minuteOfDay), \(tenant.maxPushesPerDay), \(tenant.apnsTopic),
                \(tenant.createdAt.unixSeconds), \(tenant.pushExpiry.rawValue), \(tenant.suspended),
                \(tenant.defaultQuietHours?.start.minuteOfDay), \(tenant.defaultQuietHours?.end.minuteOfDay),
                \(tenant.weekdays.mask), \(tenant.apnsEnvironment?.rawValue), \(tenant.adminsManageAPNsCredentials),
                \(tenant.firstDelivery.rawValue), \(try StoredForm.encode(tenant.learnedTiming)))
            """,
            logger
        )
    }

    static let tenantColumns = """
        id, name, default_language, default_time_zone, default_delivery_minute, max_pushes_per_day, apns_topic,
            push_expiry, created_at, suspended, default_quiet_start, default_quiet_end, weekdays, apns_environment,
            admins_manage_apns, first_delivery, learned_timing
        """

    public func tenant(_ id: TenantID) async throws -> Tenant? {
        try await read { [self] connection in
            try await connection.rows(
                "SELECT \(unescaped: Self.tenantColumns) FROM tenants WHERE id = \(id.rawValue)",
                logger
            ).first.map(Self.tenant(from:))
        }
    }

    public func tenants() async throws -> [Tenant] {
        try await read { [self] connection in
            try await connection.rows(
                "SELECT \(unescaped: Self.tenantColumns) FROM tenants ORDER BY id COLLATE \"C\"",
                logger
            )
            .map(Self.tenant(from:))
        }
    }

    public func setPushExpiry(tenant: TenantID, _ expiry: PushExpiry) async throws {
        try await write { [self] connection in
            let changed = try await connection.run(
                "UPDATE tenants SET push_expiry = \(expiry.rawValue) WHERE id = \(tenant.rawValue) RETURNING 1",
                logger
            )
            guard changed == 1 else { throw EngineError(.unknownTenant, "unknown tenant \(tenant)") }
            try await apply(.tenantChanged(tenant), connection)
        }
    }

    public func createUser(_ new: NewUser) async throws -> User {
        try await createUsers([new])[0]
    }

    /// Inserts the users and their rows of the due index (a fire time of 0 with no date asks the scheduler to plan
    /// them) with two statements per 5,000 users, in one transaction.
    public func createUsers(_ users: [NewUser]) async throws -> [User] {
        guard !users.isEmpty else { return [] }
        return try await write { [self] connection in try await self.insertUsers(users, connection) }
    }

    func insertUsers(_ users: [NewUser], _ connection: PostgresConnection) async throws -> [User] {
        let now = Date().unixSeconds
        var created: [User] = []
        created.reserveCapacity(users.count)
        for start in stride(from: 0, to: users.count, by: 5000) {
            let chunk = users[start..<min(users.count, start + 5000)]
            let rows = try await connection.rows(
                """
                INSERT INTO users (tenant_id, username, password_hash, language, life_areas, enabled, time_zone,
                    delivery_minute, quiet_start, quiet_end, weekdays, created_at, is_admin)
                SELECT tenant, username, hash, NULLIF(language, ''), scores, true, NULLIF(zone, ''),
                    NULLIF(minute, -1), NULLIF(quiet_start, -1), NULLIF(quiet_end, -1), weekdays, \(now), admin
                FROM UNNEST(\(chunk.map(\.tenant.rawValue)), \(chunk.map(\.username)),
                    \(chunk.map(\.passwordHash)), \(chunk.map { $0.language ?? "" }),
                    \(chunk.map { StoredForm.encodeScores($0.lifeAreas) }),
                    \(chunk.map { $0.preferences.timeZone ?? "" }),
                    \(chunk.map { $0.preferences.deliveryTime?.minuteOfDay ?? -1 }),
                    \(chunk.map { $0.preferences.quietHours?.start.minuteOfDay ?? -1 }),
                    \(chunk.map { $0.preferences.quietHours?.end.minuteOfDay ?? -1 }),
                    \(chunk.map(\.preferences.weekdays.mask)), \(chunk.map(\.isAdmin)))
                    WITH ORDINALITY AS v(tenant, username, hash, language, scores, zone, minute, quiet_start,
                        quiet_end, weekdays, admin, position)
                ORDER BY position
                RETURNING id
                """,
                logger
            )
            // INSERT ... SELECT ... ORDER BY assigns identities in that order; RETURNING's order is not
            // promised, so the ids are sorted to match.
            let ids = try rows.map { try $0.at(0, as: Int64.self) }.sorted()
            guard ids.count == chunk.count else { throw EngineError(.storage, "users were not all inserted") }
            try await connection.run(
                """
                INSERT INTO schedules (user_id, tenant_id, not_before, fire_at)
                SELECT * , 0 FROM UNNEST(\(ids), \(chunk.map(\.tenant.rawValue)), \(chunk.map { $0.startsAt?.unixSeconds ?? 0 }))
                """,
                logger
            )
            for (id, new) in zip(ids, chunk) {
                created.append(
                    User(
                        id: UserID(id),
                        tenant: new.tenant,
                        username: new.username,
                        passwordHash: new.passwordHash,
                        language: new.language,
                        lifeAreas: new.lifeAreas,
                        enabled: true,
                        preferences: new.preferences,
                        isAdmin: new.isAdmin,
                        createdAt: Date(unixSeconds: now)
                    )
                )
            }
        }
        return created
    }

    static let userColumns = """
        id, tenant_id, username, password_hash, language, life_areas, enabled, time_zone, delivery_minute,
            quiet_start, quiet_end, weekdays, is_admin, created_at
        """

    public func user(tenant: TenantID, username: String) async throws -> User? {
        let candidates = try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.userColumns) FROM users
                WHERE tenant_id = \(tenant.rawValue) AND \(unescaped: Self.foldedUsername) = \(UsernameMatch.key(username))
                ORDER BY username = \(username) DESC, id LIMIT 2
                """,
                logger
            ).map(Self.user(from:))
        }
        return UsernameMatch.pick(candidates, typed: username)
    }

    /// A username folded as ``UsernameMatch`` does: ASCII letters only, whatever the database's locale (lower()
    /// would follow it). The unique index on users is on this very expression, so that lookups use it.
    static let foldedUsername = "translate(username, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"

    public func user(tenant: TenantID, id: UserID) async throws -> User? {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.userColumns) FROM users
                WHERE tenant_id = \(tenant.rawValue) AND id = \(id.rawValue)
                """,
                logger
            ).first.map(Self.user(from:))
        }
    }

    public func users(tenant: TenantID) async throws -> [User] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.userColumns) FROM users WHERE tenant_id = \(tenant.rawValue)
                ORDER BY username COLLATE "C"
                """,
                logger
            ).map(Self.user(from:))
        }
    }

    public func setPassword(tenant: TenantID, username: String, passwordHash: String) async throws -> Bool {
        try await write { [self] connection in
            let changed = try await connection.run(
                """
                UPDATE users SET password_hash = \(passwordHash)
                WHERE tenant_id = \(tenant.rawValue) AND username = \(username) RETURNING 1
                """,
                logger
            )
            guard changed > 0 else { return false }
            try await apply(.credentialsChanged(tenant: tenant, username: username), connection)
            return true
        }
    }

    public func setEnabled(tenant: TenantID, username: String, enabled: Bool) async throws -> Bool {
        try await write { [self] connection in
            let ids = try await connection.rows(
                """
                UPDATE users SET enabled = \(enabled)
                WHERE tenant_id = \(tenant.rawValue) AND username = \(username) RETURNING id
                """,
                logger
            )
            guard let id = try ids.first?.at(0, as: Int64.self) else { return false }
            // Re-enabling plans the row again; disabling lets the scheduler park it when it comes due.
            if enabled {
                try await connection.run(
                    "UPDATE schedules SET fire_at = 0, local_date = NULL WHERE user_id = \(id)",
                    logger
                )
            }
            try await apply(.credentialsChanged(tenant: tenant, username: username), connection)
            return true
        }
    }

    public func setPreferences(
        tenant: TenantID,
        user: UserID,
        language: String?,
        preferences: DeliveryPreferences
    ) async throws {
        try await write { [self] connection in
            let changed = try await connection.run(
                """
                UPDATE users SET language = \(language), time_zone = \(preferences.timeZone),
                    delivery_minute = \(preferences.deliveryTime?.minuteOfDay),
                    quiet_start = \(preferences.quietHours?.start.minuteOfDay),
                    quiet_end = \(preferences.quietHours?.end.minuteOfDay), weekdays = \(preferences.weekdays.mask)
                WHERE tenant_id = \(tenant.rawValue) AND id = \(user.rawValue) RETURNING 1
                """,
                logger
            )
            guard changed > 0 else { throw EngineError(.notFound, "no such user") }
            try await connection.run(
                """
                UPDATE schedules SET fire_at = 0, local_date = NULL
                WHERE user_id = \(user.rawValue) AND tenant_id = \(tenant.rawValue)
                """,
                logger
            )
            try await apply(.profileChanged(tenant: tenant, user: user), connection)
        }
    }

    public func setLifeAreas(tenant: TenantID, user: UserID, scores: LifeAreaScores) async throws {
        try await write { [self] connection in
            let changed = try await connection.run(
                """
                UPDATE users SET life_areas = \(StoredForm.encodeScores(scores))
                WHERE tenant_id = \(tenant.rawValue) AND id = \(user.rawValue) RETURNING 1
                """,
                logger
            )
            guard changed > 0 else { throw EngineError(.notFound, "no such user") }
            try await apply(.profileChanged(tenant: tenant, user: user), connection)
        }
    }

    /// A row of `tenantColumns`.
    static func tenant(from row: PostgresRandomAccessRow) throws -> Tenant {
        try Tenant(
            id: TenantID(trusted: row.at(0)),
            name: row.at(1),
            defaultLanguage: row.at(2),
            defaultTimeZone: row.at(3),
            defaultDeliveryTime: LocalTime(minuteOfDay: row.at(4)),
            maxPushesPerDay: row.at(5),
            defaultQuietHours: try StoredForm.quietHours(start: row.at(10), end: row.at(11)),
            weekdays: StoredForm.weekdays(mask: row.at(12)),
            apnsEnvironment: (try row.at(13, as: String?.self)).flatMap(APNsEnvironment.init(rawValue:)),
            apnsTopic: row.at(6),
            pushExpiry: (try row.at(7, as: String?.self)).flatMap(PushExpiry.init(rawValue:)) ?? .endOfDay,
            suspended: row.at(9),
            adminsManageAPNsCredentials: row.at(14),
            firstDelivery: (try row.at(15, as: String?.self)).flatMap(FirstDelivery.init(rawValue:))
                ?? .nextDeliveryTime,
            learnedTiming: StoredForm.learnedTiming(try row.at(16, as: String?.self)),
            createdAt: Date(unixSeconds: row.at(8))
        )
    }

    /// A row of `userColumns`.
    static func user(from row: PostgresRandomAccessRow) throws -> User {
        User(
            id: UserID(try row.at(0)),
            tenant: TenantID(trusted: try row.at(1)),
            username: try row.at(2),
            passwordHash: try row.at(3),
            language: try row.at(4),
            lifeAreas: try StoredForm.decodeScores(row.at(5)),
            enabled: try row.at(6),
            preferences: try StoredForm.preferences(
                timeZone: row.at(7),
                deliveryMinute: row.at(8),
                quietStart: row.at(9),
                quietEnd: row.at(10),
                weekdays: row.at(11)
            ),
            isAdmin: try row.at(12),
            createdAt: Date(unixSeconds: try row.at(13))
        )
    }
}
