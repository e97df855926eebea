import Foundation
import GRDB

extension SQLiteStore {
    public func registerDevice(_ device: Device) async throws -> DeviceRegistration {
        try await write { db in try self.upsertDevice(device, db) }
    }

    public func registerDevices(_ devices: [Device]) async throws -> [DeviceRegistration] {
        guard !devices.isEmpty else { return [] }
        return try await write { db in try devices.map { try self.upsertDevice($0, db) } }
    }

    private func upsertDevice(_ device: Device, _ db: Database) throws -> DeviceRegistration {
        // The owner must be a user of the same tenant: a foreign key alone would accept another tenant's user.
        guard
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT 1 FROM users WHERE id = ? AND tenant_id = ?"),
                arguments: [device.owner.rawValue, device.tenant.rawValue]
            ) != nil
        else { throw EngineError(.notFound, "no such user") }
        let previous = try Int64.fetchOne(
            db.cachedStatement(
                sql:
                    "SELECT user_id FROM devices WHERE tenant_id = ? AND topic = ? AND token = ? AND removed_at IS NULL"
            ),
            arguments: [device.tenant.rawValue, device.topic, device.token.rawValue]
        )
        try db.cachedStatement(
            sql: """
                INSERT INTO devices (tenant_id, topic, token, user_id, name, environment, registered_at, channel)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, topic, token) DO UPDATE SET user_id = excluded.user_id,
                    name = excluded.name, environment = excluded.environment, registered_at = excluded.registered_at,
                    channel = excluded.channel, quarantined_at = NULL, removed_at = NULL
                """
        ).execute(arguments: [
            device.tenant.rawValue, device.topic, device.token.rawValue, device.owner.rawValue, device.name,
            device.environment.rawValue, device.registeredAt.unixSeconds, device.channel.rawValue,
        ])
        switch previous {
        case nil: return .created
        case device.owner.rawValue: return .refreshed
        case let other?: return .moved(from: UserID(other))
        }
    }

    public func unregisterDevice(
        tenant: TenantID,
        topic: String,
        token: DeviceToken,
        owner: UserID
    ) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    DELETE FROM devices
                    WHERE tenant_id = ? AND topic = ? AND token = ? AND user_id = ? AND removed_at IS NULL
                    """,
                arguments: [tenant.rawValue, topic, token.rawValue, owner.rawValue]
            )
            guard db.changesCount > 0 else { return false }
            try self.queueDevicesRemoved(tenant, [(owner.rawValue, token.rawValue)], "unregistered", db)
            return true
        }
    }

    public func devices(tenant: TenantID, owner: UserID) async throws -> [Device] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql:
                    """
                    SELECT \(Self.deviceColumns) FROM devices
                    WHERE tenant_id = ? AND user_id = ? AND removed_at IS NULL ORDER BY registered_at DESC
                    """,
                arguments: [tenant.rawValue, owner.rawValue]
            ).map(Self.device(from:))
        }
    }

    public func deviceTallies(tenant: TenantID) async throws -> [DeviceTally] {
        try await read { db in
            try Row.fetchAll(db, sql: Self.deviceTalliesSQL, arguments: [tenant.rawValue]).map { row in
                DeviceTally(
                    channel: PushChannel(rawValue: row[5]) ?? .apns,
                    topic: row[0],
                    environment: APNsEnvironment(rawValue: row[1]) ?? .production,
                    active: row[2],
                    quarantined: row[3],
                    removed: row[4]
                )
            }
        }
    }

    static let deviceTalliesSQL = """
        SELECT topic, environment,
            count(*) FILTER (WHERE removed_at IS NULL AND quarantined_at IS NULL),
            count(*) FILTER (WHERE removed_at IS NULL AND quarantined_at IS NOT NULL),
            count(*) FILTER (WHERE removed_at IS NOT NULL), channel
        FROM devices WHERE tenant_id = ? GROUP BY channel, topic, environment ORDER BY channel, topic, environment
        """

    public func device(tenant: TenantID, topic: String, token: DeviceToken) async throws -> Device? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT \(Self.deviceColumns) FROM devices
                    WHERE tenant_id = ? AND topic = ? AND token = ? AND removed_at IS NULL
                    """,
                arguments: [tenant.rawValue, topic, token.rawValue]
            ).map(Self.device(from:))
        }
    }

    public func applyTokenVerdicts(tenant: TenantID, topic: String, _ verdicts: [TokenVerdict]) async throws -> [Bool] {
        guard !verdicts.isEmpty else { return [] }
        return try await write { db in
            let quarantine = try db.cachedStatement(
                sql: """
                    UPDATE devices SET quarantined_at = ?
                    WHERE tenant_id = ? AND topic = ? AND token = ? AND removed_at IS NULL
                    """
            )
            // Marked gone in place, purged later (`purgeRemovedDevices`): one page written instead of three.
            let remove = try db.cachedStatement(
                sql: """
                    UPDATE devices SET removed_at = ?
                    WHERE tenant_id = ? AND topic = ? AND token = ? AND registered_at < ? AND removed_at IS NULL
                    RETURNING user_id, channel
                    """
            )
            let now = Date().unixSeconds
            var removed: [(user: Int64, token: String, channel: String)] = []
            let changed = try verdicts.map { verdict in
                switch verdict.kind {
                case .quarantine(let at):
                    try quarantine.execute(arguments: [at.unixSeconds, tenant.rawValue, topic, verdict.token.rawValue])
                    return db.changesCount > 0
                case .remove(let before):
                    try remove.setArguments([now, tenant.rawValue, topic, verdict.token.rawValue, before.unixSeconds])
                    guard let row = try Row.fetchOne(remove) else { return false }
                    removed.append((row[0], verdict.token.rawValue, row[1]))
                    return true
                }
            }
            // The event's reason names the service that called the token dead: `apns` or `fcm`.
            for (channel, devices) in Dictionary(grouping: removed, by: \.channel) {
                try self.queueDevicesRemoved(tenant, devices.map { ($0.user, $0.token) }, channel, db)
            }
            return changed
        }
    }

    /// Deletes the devices APNs' verdicts marked gone before `date`, 5,000 to a transaction (about 0.1 s each on
    /// the benchmark machine), so the writer is never held long; returns how many.
    public func purgeRemovedDevices(before date: Date) async throws -> Int {
        var purged = 0
        while true {
            let deleted = try await write { db in
                try db.execute(
                    sql: """
                        DELETE FROM devices WHERE rowid IN (
                            SELECT rowid FROM devices INDEXED BY devices_removed
                            WHERE removed_at IS NOT NULL AND removed_at < ? LIMIT 5000)
                        """,
                    arguments: [date.unixSeconds]
                )
                return db.changesCount
            }
            purged += deleted
            if deleted < 5000 { return purged }
        }
    }

    /// The columns `device(from:)` reads, by position in this order.
    static let deviceColumns =
        "tenant_id, topic, token, user_id, name, environment, registered_at, quarantined_at, channel"

    /// A device from a row of `deviceColumns`, read by position (no column-name lookups per row: the push
    /// gateway decodes one per push).
    static func device(from row: Row) throws -> Device {
        let environment: String = row[5]
        let quarantinedAt: Double? = row[7]
        return try Device(
            tenant: TenantID(trusted: row[0]),
            topic: row[1],
            token: DeviceToken(trusted: row[2]),
            owner: UserID(row[3] as Int64),
            name: row[4],
            environment: APNsEnvironment(rawValue: environment) ?? .production,
            registeredAt: Date(unixSeconds: row[6]),
            quarantinedAt: quarantinedAt.map(Date.init(unixSeconds:)),
            channel: PushChannel(rawValue: row[8]) ?? .apns
        )
    }
}

extension SQLiteStore {
    /// Queues `device.removed` for the devices, if an endpoint of the tenant listens (as PostgreSQL's store does).
    func queueDevicesRemoved(
        _ tenant: TenantID,
        _ removed: [(user: Int64, token: String)],
        _ reason: String,
        _ db: Database
    ) throws {
        guard !removed.isEmpty, try webhookSubscriptions(db).contains(tenant, .deviceRemoved) else { return }
        let names = try usernames(Set(removed.map(\.user)), db)
        try apply(.devicesRemoved(tenant: tenant, removed, usernames: names, reason: reason), db)
    }
}
