import Foundation
import GRDB

extension SQLiteStore {
    public func createConsoleSession(_ session: ConsoleSession) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO console_sessions (id, role, name, tenant_id, csrf_token, created_at, last_seen_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    session.id, session.role.rawValue, session.name, session.tenant?.rawValue, session.csrfToken,
                    session.createdAt.unixSeconds, session.lastSeenAt.unixSeconds,
                ]
            )
        }
    }

    public func consoleSession(id: String) async throws -> ConsoleSession? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM console_sessions WHERE id = ?", arguments: [id]).flatMap { row in
                guard let role = AdminActor.Role(rawValue: row["role"]) else { return nil }
                return ConsoleSession(
                    id: row["id"],
                    role: role,
                    name: row["name"],
                    tenant: (row["tenant_id"] as String?).map(TenantID.init(trusted:)),
                    csrfToken: row["csrf_token"],
                    createdAt: Date(unixSeconds: row["created_at"]),
                    lastSeenAt: Date(unixSeconds: row["last_seen_at"])
                )
            }
        }
    }

    public func touchConsoleSession(id: String, at: Date) async throws {
        try await write { db in
            try db.execute(
                sql: "UPDATE console_sessions SET last_seen_at = ? WHERE id = ?",
                arguments: [at.unixSeconds, id]
            )
        }
    }

    public func deleteConsoleSession(id: String) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM console_sessions WHERE id = ?", arguments: [id]) }
    }

    public func deleteConsoleSessions(role: AdminActor.Role, name: String, tenant: TenantID?) async throws -> Int {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM console_sessions WHERE role = ? AND name = ? AND tenant_id IS ?",
                arguments: [role.rawValue, name, tenant?.rawValue]
            )
            return db.changesCount
        }
    }

    public func purgeConsoleSessions(lastSeenBefore before: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM console_sessions WHERE last_seen_at < ?", arguments: [before.unixSeconds])
            return db.changesCount
        }
    }
}
