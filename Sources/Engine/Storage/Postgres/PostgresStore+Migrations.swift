import Foundation
import Logging
import PostgresNIO

extension PostgresStore {
    /// Applies the policy at opening: an empty database gets the schema under any policy but `leave`. A schema
    /// newer than this broker knows is fine for serving (expand/contract: the previous release's nodes work on
    /// it), said once in the log; applying migrations on it is refused.
    func openSchema(_ policy: MigrationPolicy) async throws {
        switch policy {
        case .leave:
            return
        case .apply:
            try await migrate()
        case .refusePending:
            let applied = try await read { [self] connection in try await appliedVersions(connection) }
            if applied.isEmpty {
                try await migrate()
                return
            }
            let pending = Self.migrations.filter { !applied.contains($0.version) }
            if !pending.isEmpty { throw EngineError.pendingMigrations(pending.map(\.label)) }
            let known = Set(Self.migrations.map(\.version))
            let unknown = applied.subtracting(known).sorted()
            if !unknown.isEmpty {
                logger.warning(
                    "the database has migrations newer than this broker: finish the rolling upgrade",
                    metadata: ["migrations": "\(unknown.map(String.init).joined(separator: ","))"]
                )
            }
        }
    }

    public func pendingMigrations() async throws -> [PendingMigration] {
        try await read { [self] connection in
            let applied = try await appliedVersions(connection)
            var result: [PendingMigration] = []
            for migration in Self.migrations where !applied.contains(migration.version) {
                var work: [PendingMigration.Work] = []
                for (table, action) in migration.statements.flatMap(MigrationStatements.work) {
                    let rows = try await estimatedRows(table, connection)
                    work.append(PendingMigration.Work(table: table, action: action, rows: rows))
                }
                result.append(PendingMigration(name: migration.label, work: work))
            }
            return result
        }
    }

    public func applyMigrations() async throws -> [String] {
        try await migrate().map(\.label)
    }

    public func unknownMigrations() async throws -> [String] {
        let known = Set(Self.migrations.map(\.version))
        return try await schemaVersions().filter { !known.contains($0) }.map { "\($0)" }
    }

    public func schemaNames() async throws -> [String] {
        let versions = try await schemaVersions()
        let names = Dictionary(uniqueKeysWithValues: Self.migrations.map { ($0.version, $0.label) })
        return versions.map { names[$0] ?? "\($0) (newer than this broker)" }
    }

    public func caseTwins() async throws -> [CaseTwins] {
        try await read { [self] connection in
            let exists = try await connection.rows("SELECT to_regclass('users') IS NOT NULL", logger)
            guard try exists.first?.at(0, as: Bool.self) == true else { return [] }
            return try await connection.rows(
                """
                SELECT tenant_id, array_agg(username ORDER BY id) FROM users
                WHERE (tenant_id, \(unescaped: Self.foldedUsername)) IN (
                    SELECT tenant_id, \(unescaped: Self.foldedUsername) FROM users GROUP BY 1, 2 HAVING COUNT(*) > 1
                )
                GROUP BY tenant_id, \(unescaped: Self.foldedUsername)
                ORDER BY tenant_id COLLATE "C", \(unescaped: Self.foldedUsername) COLLATE "C"
                """,
                logger
            ).map { row in
                CaseTwins(tenant: TenantID(trusted: try row.at(0)), usernames: try row.at(1, as: [String].self))
            }
        }
    }

    /// The schema versions applied, oldest first (for tests and `/inspect`).
    public func schemaVersions() async throws -> [Int] {
        try await read { [self] connection in try await appliedVersions(connection).sorted() }
    }

    /// The versions recorded, without creating the table (an empty database has none).
    func appliedVersions(_ connection: PostgresConnection) async throws -> Set<Int> {
        let exists = try await connection.rows("SELECT to_regclass('broker_migrations') IS NOT NULL", logger)
        guard try exists.first?.at(0, as: Bool.self) == true else { return [] }
        return Set(
            try await connection.rows("SELECT version FROM broker_migrations", logger).map {
                try $0.at(0, as: Int.self)
            }
        )
    }

    /// The planner's estimate of a table's rows (counted when the table was never analysed); 0 for a table that
    /// does not exist yet (one an earlier pending migration creates).
    private func estimatedRows(_ table: String, _ connection: PostgresConnection) async throws -> Int {
        let estimate = try await connection.rows(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(\(table)) AND relkind = 'r'",
            logger
        )
        guard let rows = try estimate.first?.at(0, as: Int.self) else { return 0 }
        if rows >= 0 { return rows }
        let counted = try await connection.rows(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \"\(table)\""), logger)
        return try counted.first?.at(0, as: Int.self) ?? 0
    }

    /// Applies the migrations this database lacks, each in its own transaction, all under one advisory lock held
    /// by this connection: a node starting beside another waits for it and then finds nothing left to do.
    /// A migration may rebuild an index of a large table: ten minutes for it, and for another node's migration to
    /// finish while this one waits for the lock. Returns the migrations it applied (up to `target`, for tests
    /// that need an older schema).
    @discardableResult
    func migrate(upTo target: Int = .max) async throws -> [Migration] {
        try await withConnection(operation: "write", deadline: .seconds(660)) { [self] connection in
            try await connection.run("SET statement_timeout = '600s'", logger)
            try await connection.run("SET lock_timeout = '600s'", logger)
            try await connection.run("SELECT pg_advisory_lock(\(Self.migrationLock))", logger)
            var done: [Migration] = []
            do {
                try await connection.run(
                    """
                    CREATE TABLE IF NOT EXISTS broker_migrations (
                        version integer PRIMARY KEY,
                        name text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """,
                    logger
                )
                let applied = try await appliedVersions(connection)
                if let newest = applied.max(), newest > Self.migrations.last?.version ?? 0 {
                    throw EngineError(
                        .storage,
                        "the database has schema version \(newest), newer than this broker knows: upgrade the broker"
                    )
                }
                for migration in Self.migrations
                where !applied.contains(migration.version) && migration.version <= target {
                    try await connection.run("BEGIN", logger)
                    do {
                        for statement in migration.statements {
                            try await connection.run(PostgresQuery(unsafeSQL: statement), logger)
                        }
                        try await connection.run(
                            "INSERT INTO broker_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                            logger
                        )
                        try await connection.run("COMMIT", logger)
                    } catch {
                        _ = try? await connection.run("ROLLBACK", logger)
                        throw error
                    }
                    done.append(migration)
                    logger.notice(
                        "database migrated",
                        metadata: ["version": "\(migration.version)", "migration": "\(migration.name)"]
                    )
                }
            } catch {
                _ = try? await connection.run("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger)
                _ = try? await connection.run("RESET statement_timeout", logger)
                _ = try? await connection.run("RESET lock_timeout", logger)
                throw error
            }
            try await connection.run("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger)
            // The connection goes back to the pool: with the server's limits of every other statement.
            try await connection.run("RESET statement_timeout", logger)
            try await connection.run("RESET lock_timeout", logger)
            return done
        }
    }
}

extension PostgresStore.Migration {
    /// How `broker migrate` names it: `14 nodes`.
    var label: String { "\(version) \(name)" }
}
