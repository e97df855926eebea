import Foundation
import PostgresNIO

extension PostgresStore {
    public func registerDevice(_ device: Device) async throws -> DeviceRegistration {
        try await registerDevices([device])[0]
    }

    /// Registers the devices in one transaction, 5,000 to a statement when no token appears twice (one-by-one
    /// otherwise, so that a later registration of the same token sees the earlier one, as in SQLite).
    public func registerDevices(_ devices: [Device]) async throws -> [DeviceRegistration] {
        guard !devices.isEmpty else { return [] }
        var keys = Set<String>(minimumCapacity: devices.count)
        let distinct = devices.allSatisfy {
            keys.insert("\($0.tenant.rawValue)\u{0}\($0.topic)\u{0}\($0.token.rawValue)").inserted
        }
        return try await write { [self] connection in
            var registrations: [DeviceRegistration] = []
            registrations.reserveCapacity(devices.count)
            let size = distinct ? 5000 : 1
            for start in stride(from: 0, to: devices.count, by: size) {
                let chunk = Array(devices[start..<min(devices.count, start + size)])
                registrations += try await self.upsert(chunk, connection)
            }
            return registrations
        }
    }

    /// Devices whose (tenant, topic, token) keys are distinct.
    private func upsert(_ chunk: [Device], _ connection: PostgresConnection) async throws -> [DeviceRegistration] {
        let tenants = chunk.map(\.tenant.rawValue)
        let topics = chunk.map(\.topic)
        let tokens = chunk.map(\.token.rawValue)
        let owners = chunk.map(\.owner.rawValue)
        // The owner must be a user of the same tenant: a foreign key alone would accept another tenant's user.
        let known = try await connection.rows(
            """
            SELECT count(*) FROM UNNEST(\(owners), \(tenants)) AS v(owner, tenant)
            WHERE EXISTS (SELECT 1 FROM users WHERE id = v.owner AND tenant_id = v.tenant)
            """,
            logger
        ).first?.at(0, as: Int64.self)
        guard known == Int64(chunk.count) else { throw EngineError(.notFound, "no such user") }
        var previous: [String: Int64] = [:]
        for row in try await connection.rows(
            """
            SELECT d.tenant_id, d.topic, d.token, d.user_id FROM devices d
            JOIN UNNEST(\(tenants), \(topics), \(tokens)) AS v(tenant, topic, token)
                ON d.tenant_id = v.tenant AND d.topic = v.topic AND d.token = v.token
            WHERE d.removed_at IS NULL
            """,
            logger
        ) {
            let key = "\(try row.at(0, as: String.self))\u{0}\(try row.at(1, as: String.self))\u{0}"
            previous[key + (try row.at(2, as: String.self))] = try row.at(3)
        }
        try await connection.run(
            """
            INSERT INTO devices (tenant_id, topic, token, user_id, name, environment, registered_at, channel)
            SELECT * FROM UNNEST(\(tenants), \(topics), \(tokens), \(owners), \(chunk.map(\.name)),
                \(chunk.map(\.environment.rawValue)), \(chunk.map(\.registeredAt.unixSeconds)),
                \(chunk.map(\.channel.rawValue)))
            ON CONFLICT (tenant_id, topic, token) DO UPDATE SET user_id = excluded.user_id,
                name = excluded.name, environment = excluded.environment, registered_at = excluded.registered_at,
                channel = excluded.channel, quarantined_at = NULL, removed_at = NULL
            """,
            logger
        )
        return chunk.map { device in
            switch previous["\(device.tenant.rawValue)\u{0}\(device.topic)\u{0}\(device.token.rawValue)"] {
            case nil: .created
            case device.owner.rawValue: .refreshed
            case let other?: .moved(from: UserID(other))
            }
        }
    }

    public func unregisterDevice(
        tenant: TenantID,
        topic: String,
        token: DeviceToken,
        owner: UserID
    ) async throws -> Bool {
        try await write { [self] connection in
            let deleted = try await connection.run(
                """
                DELETE FROM devices
                WHERE tenant_id = \(tenant.rawValue) AND topic = \(topic) AND token = \(token.rawValue)
                    AND user_id = \(owner.rawValue) AND removed_at IS NULL
                RETURNING 1
                """,
                logger
            )
            guard deleted > 0 else { return false }
            try await self.queueDevicesRemoved(tenant, [(owner.rawValue, token.rawValue)], "unregistered", connection)
            return true
        }
    }

    /// Queues `device.removed` for the devices, if an endpoint of the tenant listens.
    func queueDevicesRemoved(
        _ tenant: TenantID,
        _ removed: [(user: Int64, token: String)],
        _ reason: String,
        _ connection: PostgresConnection
    ) async throws {
        guard !removed.isEmpty, try await webhookSubscriptions(connection).contains(tenant, .deviceRemoved) else {
            return
        }
        let names = try await usernames(Set(removed.map(\.user)), connection)
        try await apply(.devicesRemoved(tenant: tenant, removed, usernames: names, reason: reason), connection)
    }

    static let deviceColumns =
        "tenant_id, topic, token, user_id, name, environment, registered_at, quarantined_at, channel"

    public func devices(tenant: TenantID, owner: UserID) async throws -> [Device] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.deviceColumns) FROM devices
                WHERE tenant_id = \(tenant.rawValue) AND user_id = \(owner.rawValue) AND removed_at IS NULL
                ORDER BY registered_at DESC
                """,
                logger
            ).map(Self.device(from:))
        }
    }

    public func deviceTallies(tenant: TenantID) async throws -> [DeviceTally] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT topic, environment,
                    count(*) FILTER (WHERE removed_at IS NULL AND quarantined_at IS NULL),
                    count(*) FILTER (WHERE removed_at IS NULL AND quarantined_at IS NOT NULL),
                    count(*) FILTER (WHERE removed_at IS NOT NULL), channel
                FROM devices WHERE tenant_id = \(tenant.rawValue)
                GROUP BY channel, topic, environment ORDER BY channel, topic, environment
                """,
                logger
            ).map { row in
                let environment: String = try row.at(1)
                let channel: String = try row.at(5)
                return DeviceTally(
                    channel: PushChannel(rawValue: channel) ?? .apns,
                    topic: try row.at(0),
                    environment: APNsEnvironment(rawValue: environment) ?? .production,
                    active: Int(try row.at(2, as: Int64.self)),
                    quarantined: Int(try row.at(3, as: Int64.self)),
                    removed: Int(try row.at(4, as: Int64.self))
                )
            }
        }
    }

    public func device(tenant: TenantID, topic: String, token: DeviceToken) async throws -> Device? {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.deviceColumns) FROM devices
                WHERE tenant_id = \(tenant.rawValue) AND topic = \(topic) AND token = \(token.rawValue)
                    AND removed_at IS NULL
                """,
                logger
            ).first.map(Self.device(from:))
        }
    }

    /// APNs' verdicts in one transaction: one statement per kind when no token appears twice (a burst with dead
    /// tokens has thousands per batch), one per verdict otherwise, so that the first verdict on a token wins.
    public func applyTokenVerdicts(tenant: TenantID, topic: String, _ verdicts: [TokenVerdict]) async throws -> [Bool] {
        guard !verdicts.isEmpty else { return [] }
        let distinct = Set(verdicts.map(\.token)).count == verdicts.count
        return try await write { [self] connection in
            var changed = [Bool](repeating: false, count: verdicts.count)
            var gone: [(user: Int64, token: String, channel: String)] = []
            let groups = distinct ? [Array(verdicts.indices)] : verdicts.indices.map { [$0] }
            for group in groups {
                var quarantined: [(index: Int, token: String, at: Double)] = []
                var removed: [(index: Int, token: String, before: Double)] = []
                for index in group {
                    switch verdicts[index].kind {
                    case .quarantine(let at):
                        quarantined.append((index, verdicts[index].token.rawValue, at.unixSeconds))
                    case .remove(let before):
                        removed.append((index, verdicts[index].token.rawValue, before.unixSeconds))
                    }
                }
                if !quarantined.isEmpty {
                    for row in try await connection.rows(
                        """
                        UPDATE devices d SET quarantined_at = v.at
                        FROM UNNEST(\(quarantined.map(\.index)), \(quarantined.map(\.token)), \(quarantined.map(\.at)))
                            AS v(position, token, at)
                        WHERE d.tenant_id = \(tenant.rawValue) AND d.topic = \(topic) AND d.token = v.token
                            AND d.removed_at IS NULL
                        RETURNING v.position
                        """,
                        logger
                    ) {
                        changed[try row.at(0, as: Int.self)] = true
                    }
                }
                if !removed.isEmpty {
                    // Marked gone in place, purged later (`purgeRemovedDevices`).
                    for row in try await connection.rows(
                        """
                        UPDATE devices d SET removed_at = \(Date().unixSeconds)
                        FROM UNNEST(\(removed.map(\.index)), \(removed.map(\.token)), \(removed.map(\.before)))
                            AS v(position, token, before)
                        WHERE d.tenant_id = \(tenant.rawValue) AND d.topic = \(topic) AND d.token = v.token
                            AND d.registered_at < v.before AND d.removed_at IS NULL
                        RETURNING v.position, d.user_id, d.token, d.channel
                        """,
                        logger
                    ) {
                        gone.append((try row.at(1, as: Int64.self), try row.at(2, as: String.self), try row.at(3)))
                        changed[try row.at(0, as: Int.self)] = true
                    }
                }
            }
            // The event's reason names the service that called the token dead: `apns` or `fcm`.
            for (channel, devices) in Dictionary(grouping: gone, by: \.channel) {
                try await self.queueDevicesRemoved(tenant, devices.map { ($0.user, $0.token) }, channel, connection)
            }
            return changed
        }
    }

    /// Deletes the devices APNs' verdicts marked gone before `date`, 5,000 to a transaction; returns how many.
    public func purgeRemovedDevices(before date: Date) async throws -> Int {
        var purged = 0
        while true {
            let deleted = try await write { [self] connection in
                try await connection.run(
                    """
                    DELETE FROM devices WHERE ctid IN (
                        SELECT ctid FROM devices WHERE removed_at IS NOT NULL AND removed_at < \(date.unixSeconds)
                        LIMIT 5000)
                    RETURNING 1
                    """,
                    logger
                )
            }
            purged += deleted
            if deleted < 5000 { return purged }
        }
    }

    /// A device from a row of `deviceColumns`.
    static func device(from row: PostgresRandomAccessRow) throws -> Device {
        let environment: String = try row.at(5)
        let quarantinedAt: Double? = try row.at(7)
        return try Device(
            tenant: TenantID(trusted: row.at(0)),
            topic: row.at(1),
            token: DeviceToken(trusted: row.at(2)),
            owner: UserID(try row.at(3, as: Int64.self)),
            name: row.at(4),
            environment: APNsEnvironment(rawValue: environment) ?? .production,
            registeredAt: Date(unixSeconds: row.at(6)),
            quarantinedAt: quarantinedAt.map(Date.init(unixSeconds:)),
            channel: PushChannel(rawValue: try row.at(8)) ?? .apns
        )
    }
}
