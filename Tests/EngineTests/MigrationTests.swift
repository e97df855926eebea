import Foundation
import GRDB
import Logging
import TestSupport
import Testing

@testable import Engine

/// Upgrades: a store opened by a node or an admin command never migrates unless told to, `broker migrate --check`
/// says what a migration will touch, and shipped migrations only add (expand/contract).
@Suite("Schema migrations: who applies them, what they cost, what they may change", .timeLimit(.minutes(2)))
struct MigrationTests {
    static let logger = Logger(label: "migration-tests")

    /// A SQLite file migrated up to `last` (an older release's schema).
    static func sqliteFile(upTo last: String) throws -> String {
        let path = TemporaryDirectories.make("migrations-") + "/broker.sqlite"
        try SQLiteStore.migrator.migrate(try DatabaseQueue(path: path), upTo: last)
        return path
    }

    @Test("SQLite: a file that lacks migrations is refused with their names; applying them lets it open")
    func sqlitePolicy() async throws {
        let path = try Self.sqliteFile(upTo: "v14-webhooks")
        let error = await #expect(throws: EngineError.self) {
            _ = try await SQLiteStore(configuration: .init(path: path, migrations: .refusePending), logger: Self.logger)
        }
        // The migrations shipped after v14, whatever later releases add.
        let later = Array(SQLiteStore.migrator.migrations.drop { $0 != "v14-webhooks" }.dropFirst())
        #expect(later.starts(with: ["v15-console-sessions", "v16-provider-tokens"]))
        #expect(error?.message.contains(later.joined(separator: ", ")) == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("broker migrate") == true)
        let left = try await SQLiteStore(configuration: .init(path: path, migrations: .leave), logger: Self.logger)
        #expect(try await left.pendingMigrations().map(\.name) == later)
        #expect(try await left.applyMigrations() == later)
        #expect(try await left.pendingMigrations().isEmpty)
        #expect(try await left.applyMigrations().isEmpty)
        let reopened = try await SQLiteStore(
            configuration: .init(path: path, migrations: .refusePending),
            logger: Self.logger
        )
        #expect(try await reopened.schemaNames() == SQLiteStore.migrator.migrations)
    }

    @Test("SQLite: an empty file gets the whole schema on a first start, without --migrate")
    func sqliteFirstStart() async throws {
        let path = TemporaryDirectories.make("migrations-") + "/broker.sqlite"
        let store = try await SQLiteStore(
            configuration: .init(path: path, migrations: .refusePending),
            logger: Self.logger
        )
        #expect(try await store.schemaNames() == SQLiteStore.migrator.migrations)
        #expect(try await store.tenants().isEmpty)
    }

    @Test("SQLite: the check names the rows each pending migration rewrites, read from the SQL it runs")
    func sqliteCost() async throws {
        let path = try Self.sqliteFile(upTo: "v12-apns-credentials")
        // Deliveries alone (their users and impulses do not matter here).
        var unchecked = Configuration()
        unchecked.foreignKeysEnabled = false
        let queue = try DatabaseQueue(path: path, configuration: unchecked)
        try await queue.write { db in
            for _ in 0..<3 {
                try db.execute(
                    sql: """
                        INSERT INTO deliveries (tenant_id, user_id, impulse_id, kind, assigned_at)
                        VALUES ('acme', 1, 'i1', 'daily', 0)
                        """
                )
            }
        }
        try queue.close()
        let store = try await SQLiteStore(configuration: .init(path: path, migrations: .leave), logger: Self.logger)
        let pending = try await store.pendingMigrations()
        #expect(
            pending.map(\.name) == Array(SQLiteStore.migrator.migrations.drop { $0 != "v13-engagement-reports" })
        )
        let reports = try #require(pending.first)
        #expect(reports.work.contains(.init(table: "deliveries", action: .rewrites, rows: 3)), "\(reports.work)")
        #expect(reports.description.contains("rewrites deliveries (3 rows)"), "\(reports)")
        #expect(
            pending.first { $0.name == "v16-provider-tokens" }?.description
                == "v16-provider-tokens: schema only, no rows to touch"
        )
        // The check changed nothing.
        #expect(try await store.pendingMigrations().count == pending.count)
    }

    @Test("A schema newer than the broker: a node of the previous release starts on it; migrating is refused")
    func newer() async throws {
        let path = try Self.sqliteFile(upTo: SQLiteStore.migrator.migrations.last!)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-future')")
        }
        let node = try await SQLiteStore(
            configuration: .init(path: path, migrations: .refusePending),
            logger: Self.logger
        )
        #expect(try await node.tenants().isEmpty)
        await #expect(throws: EngineError.self) { try await node.applyMigrations() }
        await #expect(throws: EngineError.self) {
            _ = try await SQLiteStore(configuration: .init(path: path, migrations: .apply), logger: Self.logger)
        }
        var configuration = try PostgresStoreConfiguration(url: try await PostgresTestDatabases.make())
        let current = try await PostgresStore(configuration: configuration, logger: Self.logger)
        _ = try await current.write { connection in
            try await connection.query(
                "INSERT INTO broker_migrations (version, name) VALUES (99, 'future')",
                logger: current.logger
            )
        }
        configuration.migrations = .refusePending
        let old = try await PostgresStore(configuration: configuration, logger: Self.logger)
        #expect(try await old.schemaNames().last == "99 (newer than this broker)")
        await #expect(throws: EngineError.self) { try await old.applyMigrations() }
        await old.close()
        await current.close()
    }

    @Test("PostgreSQL: a database that lacks migrations is refused with their names; the check lists them")
    func postgresPolicy() async throws {
        let url = try await PostgresTestDatabases.make()
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.migrations = .leave
        let old = try await PostgresStore(configuration: configuration, logger: Self.logger)
        #expect(try await old.pendingMigrations().count == PostgresStore.migrations.count)
        try await old.migrate(upTo: 12)
        let pending = try await old.pendingMigrations()
        let later = PostgresStore.migrations.filter { $0.version > 12 }.map(\.label)
        #expect(later.starts(with: ["13 provider-tokens", "14 nodes"]))
        #expect(pending.map(\.name) == later)
        #expect(pending.prefix(2).allSatisfy { $0.work.isEmpty })
        configuration.migrations = .refusePending
        let error = await #expect(throws: EngineError.self) {
            _ = try await PostgresStore(configuration: configuration, logger: Self.logger)
        }
        #expect(error?.message.contains(later.joined(separator: ", ")) == true, "\(error?.message ?? "")")
        #expect(try await old.applyMigrations() == later)
        #expect(try await old.pendingMigrations().isEmpty)
        let current = try await PostgresStore(configuration: configuration, logger: Self.logger)
        #expect(try await current.schemaVersions() == PostgresStore.migrations.map(\.version))
        await current.close()
        await old.close()
    }

    @Test("PostgreSQL: the check reads each migration's tables from its statements, with their rows")
    func postgresCost() async throws {
        let url = try await PostgresTestDatabases.make()
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.migrations = .leave
        let store = try await PostgresStore(configuration: configuration, logger: Self.logger)
        try await store.migrate(upTo: 3)
        let pending = try await store.pendingMigrations()
        let inPlace = try #require(pending.first { $0.name == "4 updates-in-place" })
        #expect(inPlace.work.contains(.init(table: "deliveries", action: .reads, rows: 0)), "\(inPlace.work)")
        await store.close()
    }

    @Test("PostgreSQL: an empty database gets the whole schema on a first start, without --migrate")
    func postgresFirstStart() async throws {
        var configuration = try PostgresStoreConfiguration(url: try await PostgresTestDatabases.make())
        configuration.migrations = .refusePending
        let store = try await PostgresStore(configuration: configuration, logger: Self.logger)
        #expect(try await store.schemaVersions() == PostgresStore.migrations.map(\.version))
        await store.close()
    }

    /// The shipped migrations that would break a previous release's nodes, found from their SQL. These predate
    /// expand/contract; a new contraction changes this list and fails the test: it needs a release in between
    /// (the code that stops reading what goes first, the migration that removes it a release later).
    @Test("Shipped migrations only add, but for the contractions made before expand/contract")
    func expandOnly() throws {
        let postgres = PostgresStore.migrations.compactMap { migration in
            migration.statements.compactMap(MigrationStatements.contraction).first.map { "\(migration.label): \($0)" }
        }
        let traced = try SQLiteStore.statements(of: SQLiteStore.migrator.migrations, after: [])
        let sqlite = SQLiteStore.migrator.migrations.compactMap { name in
            (traced[name] ?? []).compactMap(MigrationStatements.contraction).first.map { "\(name): \($0)" }
        }
        #expect(postgres == ["4 updates-in-place: renames in deliveries"])
        #expect(sqlite == [])
    }

    @Test("Statements are read for the rows they touch and for what they take away")
    func statements() {
        #expect(MigrationStatements.work("UPDATE deliveries SET a = 1").map(\.table) == ["deliveries"])
        #expect(
            MigrationStatements.work("CREATE UNIQUE INDEX IF NOT EXISTS x ON users (name)").map(\.table) == ["users"]
        )
        #expect(MigrationStatements.work("CREATE TABLE t (a int)").isEmpty)
        #expect(MigrationStatements.work("INSERT INTO a (x) VALUES (1)").isEmpty)
        let copied = MigrationStatements.work("INSERT INTO a (x) SELECT y FROM b JOIN c ON c.id = b.id")
        #expect(copied.map(\.table) == ["b", "c"] && copied.allSatisfy { $0.action == .reads })
        #expect(MigrationStatements.work("ALTER TABLE t ALTER COLUMN a TYPE bigint").map(\.action) == [.rewrites])
        #expect(MigrationStatements.contraction("ALTER TABLE t ADD COLUMN a int") == nil)
        #expect(MigrationStatements.contraction("ALTER TABLE t ADD COLUMN a int NOT NULL DEFAULT 0") == nil)
        #expect(MigrationStatements.contraction("ALTER TABLE t ADD COLUMN a int NOT NULL") != nil)
        #expect(MigrationStatements.contraction("ALTER TABLE t DROP COLUMN a") != nil)
        #expect(MigrationStatements.contraction("ALTER TABLE t RENAME COLUMN a TO b") != nil)
        #expect(MigrationStatements.contraction("ALTER TABLE t ALTER COLUMN a SET NOT NULL") != nil)
        #expect(MigrationStatements.contraction("DROP TABLE IF EXISTS t") != nil)
        #expect(MigrationStatements.contraction("-- DROP TABLE t\nCREATE TABLE u (a int)") == nil)
    }
}
