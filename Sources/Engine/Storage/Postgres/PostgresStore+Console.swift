import Foundation
import PostgresNIO

extension PostgresStore {
    public func createConsoleSession(_ session: ConsoleSession) async throws {
        try await write { [self] connection in
            try await connection.run(
                """
                INSERT INTO console_sessions (id, role, name, tenant_id, csrf_token, created_at, last_seen_at)
                VALUES (\(session.id), \(session.role.rawValue), \(session.name), \(session.tenant?.rawValue),
                    \(session.csrfToken), \(session.createdAt.unixSeconds), \(session.lastSeenAt.unixSeconds))
                """,
                logger
            )
        }
    }

    public func consoleSession(id: String) async throws -> ConsoleSession? {
        try await read { [self] connection in
            guard
                let row = try await connection.rows(
                    """
                    SELECT role, name, tenant_id, csrf_token, created_at, last_seen_at FROM console_sessions
                    WHERE id = \(id)
                    """,
                    logger
                ).first, let role = AdminActor.Role(rawValue: try row.at(0))
            else { return nil }
            return ConsoleSession(
                id: id,
                role: role,
                name: try row.at(1),
                tenant: (try row.at(2, as: String?.self)).map(TenantID.init(trusted:)),
                csrfToken: try row.at(3),
                createdAt: Date(unixSeconds: try row.at(4)),
                lastSeenAt: Date(unixSeconds: try row.at(5))
            )
        }
    }

    public func touchConsoleSession(id: String, at: Date) async throws {
        try await write { [self] connection in
            try await connection.run(
                "UPDATE console_sessions SET last_seen_at = \(at.unixSeconds) WHERE id = \(id)",
                logger
            )
        }
    }

    public func deleteConsoleSession(id: String) async throws {
        try await write { [self] connection in
            try await connection.run("DELETE FROM console_sessions WHERE id = \(id)", logger)
        }
    }

    public func deleteConsoleSessions(role: AdminActor.Role, name: String, tenant: TenantID?) async throws -> Int {
        try await write { [self] connection in
            try await connection.run(
                """
                DELETE FROM console_sessions WHERE role = \(role.rawValue) AND name = \(name)
                    AND tenant_id IS NOT DISTINCT FROM \(tenant?.rawValue) RETURNING 1
                """,
                logger
            )
        }
    }

    public func purgeConsoleSessions(lastSeenBefore before: Date) async throws -> Int {
        try await write { [self] connection in
            try await connection.run(
                "DELETE FROM console_sessions WHERE last_seen_at < \(before.unixSeconds) RETURNING 1",
                logger
            )
        }
    }
}
