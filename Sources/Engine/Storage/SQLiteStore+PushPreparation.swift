import Foundation
import GRDB

extension SQLiteStore {
    /// A batch's devices. The index is named: without statistics SQLite preferred the primary key's tenant prefix
    /// and read every device of the tenant for each batch (quadratic in the burst, a third of its time).
    static func pushDevicesSQL(_ placeholders: String) -> String {
        """
        SELECT * FROM devices INDEXED BY devices_owner WHERE user_id IN (\(placeholders)) AND tenant_id = ?
        ORDER BY registered_at DESC
        """
    }

    public func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget] {
        guard !users.isEmpty else { return [:] }
        return try await read { db in
            var targets = Dictionary(uniqueKeysWithValues: users.map { ($0, PushTarget(devices: [], unreadCount: 0)) })
            for chunk in stride(from: 0, to: users.count, by: 500).map({ Array(users[$0..<min(users.count, $0 + 500)]) }
            ) {
                let list = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                let ids = StatementArguments(chunk.map(\.rawValue))
                for row in try Row.fetchAll(
                    db,
                    sql: Self.pushDevicesSQL(list),
                    arguments: ids + [tenant.rawValue]
                ) {
                    let device = try Self.device(from: row)
                    targets[device.owner]?.devices.append(device)
                }
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT user_id, COUNT(*) AS n FROM deliveries
                        WHERE user_id IN (\(list)) AND tenant_id = ? AND read_at IS NULL GROUP BY user_id
                        """,
                    arguments: ids + [tenant.rawValue]
                ) {
                    targets[UserID(row["user_id"])]?.unreadCount = row["n"]
                }
            }
            return targets
        }
    }
}
