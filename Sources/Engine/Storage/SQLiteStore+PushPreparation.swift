import Foundation
import GRDB

extension SQLiteStore {
    /// A batch's devices (`deviceColumns`, decoded by `device(from:)`), each followed by its owner's unread count
    /// in the tenant (the badge) from the covering index: one statement, so the `IN` list is built once. The
    /// index is named: without statistics SQLite preferred the primary key's tenant prefix and read every device
    /// of the tenant for each batch (quadratic in the burst, a third of its time).
    static func pushTargetsSQL(_ placeholders: String) -> String {
        """
        SELECT \(deviceColumns),
            (SELECT COUNT(*) FROM deliveries
                WHERE deliveries.user_id = devices.user_id AND deliveries.tenant_id = devices.tenant_id
                AND read_at IS NULL),
            (SELECT time_zone FROM users WHERE users.id = devices.user_id)
        FROM devices INDEXED BY devices_owner
        WHERE user_id IN (\(placeholders)) AND tenant_id = ? AND removed_at IS NULL
        ORDER BY registered_at DESC
        """
    }

    /// Lengths of the `IN` lists: a batch is padded up to the next one (repeating its first user), so each
    /// statement is prepared once per connection and then reused, instead of being parsed for every batch.
    /// Powers of two, so that padding at most doubles a list: the gateway's batches of 250 users were padded to
    /// 512 when the sizes were 8, 64 and 512, and SQLite binds and sorts every value of the list.
    static let userListSizes = [8, 16, 32, 64, 128, 256, 512]

    /// Runs `body` for each chunk of at most 512 users with the chunk's `IN` list (`?,?,...` of a padded length)
    /// and its arguments: the users, padded, then the tenant.
    static func forEachUserList(
        _ users: [UserID],
        tenant: TenantID,
        _ body: (_ placeholders: String, _ arguments: [DatabaseValue]) throws -> Void
    ) throws {
        let widest = userListSizes.last!
        for start in stride(from: 0, to: users.count, by: widest) {
            let chunk = users[start..<min(users.count, start + widest)]
            let size = userListSizes.first { $0 >= chunk.count }!
            var values = [DatabaseValue]()
            values.reserveCapacity(size + 2)
            for user in chunk { values.append(user.rawValue.databaseValue) }
            while values.count < size { values.append(values[0]) }
            values.append(tenant.rawValue.databaseValue)
            try body(Array(repeating: "?", count: size).joined(separator: ","), values)
        }
    }

    public func pushedDevices(tenant: TenantID, deliveries: [DeliveryID]) async throws -> [DeliveryID: Set<String>] {
        guard !deliveries.isEmpty else { return [:] }
        return try await read { db in
            var found: [DeliveryID: Set<String>] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, pushed_devices FROM deliveries
                    WHERE tenant_id = ? AND settled_at IS NULL AND id IN (SELECT value FROM json_each(?))
                    """,
                arguments: [tenant.rawValue, "[" + deliveries.map { String($0.rawValue) }.joined(separator: ",") + "]"]
            )
            while let row = try rows.next() {
                found[DeliveryID(row[0] as Int64)] = Delivery.pushedDevices(stored: row[1])
            }
            return found
        }
    }

    public func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget] {
        guard !users.isEmpty else { return [:] }
        return try await read { db in
            var targets = [UserID: PushTarget](minimumCapacity: users.count)
            for user in users { targets[user] = PushTarget(devices: [], unreadCount: 0) }
            try Self.forEachUserList(users, tenant: tenant) { list, values in
                let statement = try db.cachedStatement(sql: Self.pushTargetsSQL(list))
                try statement.bindPositionally(values)
                let rows = try Row.fetchCursor(statement)
                while let row = try rows.next() {
                    let device = try Self.device(from: row)
                    targets[device.owner]?.devices.append(device)
                    targets[device.owner]?.unreadCount = row[9]
                    targets[device.owner]?.timeZone = row[10]
                }
            }
            return targets
        }
    }
}
