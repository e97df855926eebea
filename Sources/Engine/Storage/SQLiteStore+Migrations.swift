import Foundation
import GRDB
import Synchronization

extension SQLiteStore {
    /// Applies the policy at opening: an empty file gets the schema under any policy but `leave`.
    func openSchema(_ policy: MigrationPolicy) async throws {
        switch policy {
        case .leave:
            return
        case .apply:
            try await refuseNewer()
            try await Self.migrator.migrate(pool)
        case .refusePending:
            let applied = try await pool.read { db in try Self.migrator.appliedIdentifiers(db) }
            if applied.isEmpty {
                try await Self.migrator.migrate(pool)
                return
            }
            let pending = Self.migrator.migrations.filter { !applied.contains($0) }
            if !pending.isEmpty { throw EngineError.pendingMigrations(pending) }
            let unknown = applied.subtracting(Self.migrator.migrations).sorted()
            if !unknown.isEmpty {
                logger.warning(
                    "the database has migrations newer than this broker: finish the upgrade",
                    metadata: ["migrations": "\(unknown.joined(separator: ","))"]
                )
            }
        }
    }

    public func pendingMigrations() async throws -> [PendingMigration] {
        let applied = try await read { db in try Self.migrator.appliedIdentifiers(db) }
        let pending = Self.migrator.migrations.filter { !applied.contains($0) }
        guard !pending.isEmpty else { return [] }
        let statements = try Self.statements(of: pending, after: applied)
        return try await read { db in
            try pending.map { name in
                let work = try (statements[name] ?? []).flatMap(MigrationStatements.work).map { table, action in
                    let rows =
                        try db.tableExists(table) ? Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(table)\"") ?? 0 : 0
                    return PendingMigration.Work(table: table, action: action, rows: rows)
                }
                return PendingMigration(name: name, work: work)
            }
        }
    }

    public func applyMigrations() async throws -> [String] {
        try await refuseNewer()
        let applied = try await read { db in try Self.migrator.appliedIdentifiers(db) }
        try await Self.migrator.migrate(pool)
        let names = Self.migrator.migrations.filter { !applied.contains($0) }
        for name in names { logger.notice("database migrated", metadata: ["migration": "\(name)"]) }
        return names
    }

    /// Migrating is for the newest release: an older binary leaves a newer schema alone.
    private func refuseNewer() async throws {
        let unknown = try await read { db in
            try Self.migrator.appliedIdentifiers(db).subtracting(Self.migrator.migrations).sorted()
        }
        guard unknown.isEmpty else {
            throw EngineError(
                .storage,
                "the database has migrations newer than this broker knows (\(unknown.joined(separator: ", "))): upgrade the broker"
            )
        }
    }

    public func unknownMigrations() async throws -> [String] {
        try await read { db in try Self.migrator.appliedIdentifiers(db).subtracting(Self.migrator.migrations).sorted() }
    }

    public func schemaNames() async throws -> [String] {
        try await read { db in try Self.migrator.appliedMigrations(db) }
    }

    public func caseTwins() async throws -> [CaseTwins] {
        try await read { db in
            guard try db.tableExists("users") else { return [] }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT tenant_id, username FROM users
                    WHERE (tenant_id, lower(username)) IN (
                        SELECT tenant_id, lower(username) FROM users GROUP BY 1, 2 HAVING COUNT(*) > 1
                    )
                    ORDER BY tenant_id, lower(username), id
                    """
            ).reduce(into: [CaseTwins]()) { twins, row in
                let tenant = TenantID(trusted: row[0])
                let name: String = row[1]
                if let last = twins.last, last.tenant == tenant,
                    UsernameMatch.key(last.usernames[0]) == UsernameMatch.key(name)
                {
                    twins[twins.count - 1].usernames.append(name)
                } else {
                    twins.append(CaseTwins(tenant: tenant, usernames: [name]))
                }
            }
        }
    }

    /// The SQL each pending migration runs, recorded by running them on an empty in-memory database that first
    /// gets the migrations already applied (a migration is code, not a list of statements).
    static func statements(of pending: [String], after applied: Set<String>) throws -> [String: [String]] {
        let recorded = Mutex<[String]>([])
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { recorded.withLock { $0.append(statement.sql) } }
            }
        }
        let scratch = try DatabaseQueue(configuration: configuration)
        if let last = migrator.migrations.last(where: applied.contains) { try migrator.migrate(scratch, upTo: last) }
        var result: [String: [String]] = [:]
        for name in pending {
            recorded.withLock { $0.removeAll() }
            try migrator.migrate(scratch, upTo: name)
            result[name] = recorded.withLock { $0 }
        }
        return result
    }
}
