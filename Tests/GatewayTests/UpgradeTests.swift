import Foundation
import GRDB
import Logging
import TestSupport
import Testing

@testable import Engine

/// Upgrades through the real commands: nodes and admin commands refuse a store that lacks migrations and say what
/// to run; `broker migrate --check` lists them with their cost and changes nothing; `broker migrate` applies them.
@Suite("Upgrades through broker migrate", .timeLimit(.minutes(3)))
struct UpgradeTests {
    @Test("SQLite: serve and admin commands refuse an older schema; migrate --check lists it; migrate applies it")
    func sqlite() async throws {
        let data = TestBroker.temporaryDirectory()
        try SQLiteStore.migrator.migrate(try DatabaseQueue(path: data + "/broker.sqlite"), upTo: "v14-webhooks")
        let refused = try await BrokerProcess.run(["tenant", "create", "acme"], dataDirectory: data)
        #expect(refused.status != 0)
        // The migrations shipped after v14, whatever later releases add.
        let later = Array(SQLiteStore.migrator.migrations.drop { $0 != "v14-webhooks" }.dropFirst())
        #expect(later.starts(with: ["v15-console-sessions", "v16-provider-tokens"]))
        #expect(refused.error.contains(later.joined(separator: ", ")), "\(refused.error)")
        #expect(refused.error.contains("broker migrate"))
        let serve = try await BrokerProcess.run(["serve", "--listen", "127.0.0.1:0"], dataDirectory: data)
        #expect(serve.status != 0 && serve.error.contains("broker migrate"), "\(serve.error)")
        let check = try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data)
        #expect(check.status == 2, "\(check.error)")
        #expect(check.output.contains("\(later.count) pending migrations:"), "\(check.output)")
        #expect(check.output.contains("v16-provider-tokens: schema only, no rows to touch"))
        // The check changed nothing.
        #expect(try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data).status == 2)
        let applied = try await BrokerProcess.run(["migrate"], dataDirectory: data)
        #expect(
            applied.status == 0 && applied.output.contains("applied \(later.count) in"),
            "\(applied.output) \(applied.error)"
        )
        let current = try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data)
        #expect(current.status == 0 && current.output.contains("up to date (latest migration: \(later.last!))"))
        #expect(try await BrokerProcess.run(["tenant", "create", "acme"], dataDirectory: data).status == 0)
    }

    @Test("migrate and migrate --check refuse a schema a newer release migrated (exit 4), on both stores")
    func newerSchema() async throws {
        let data = TestBroker.temporaryDirectory()
        let queue = try DatabaseQueue(path: data + "/broker.sqlite")
        try SQLiteStore.migrator.migrate(queue)
        try await queue.write { try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('v99-from-the-future')") }
        for arguments in [["migrate"], ["migrate", "--check"]] {
            let refused = try await BrokerProcess.run(arguments, dataDirectory: data)
            #expect(refused.status == 4, "\(arguments): \(refused.output) \(refused.error)")
            #expect(refused.error.contains("v99-from-the-future") && !refused.output.contains("up to date"))
        }

        let url = try await PostgresTestDatabases.makeMigrated() + "?sslmode=disable"
        let store = try await PostgresStore(
            configuration: try PostgresStoreConfiguration(url: url),
            logger: Logger(label: "t")
        )
        try await store.write { connection in
            try await connection.run(
                "INSERT INTO broker_migrations (version, name) VALUES (999, 'from-the-future')",
                store.logger
            )
        }
        await store.close()
        let folder = TestBroker.temporaryDirectory()
        let refused = try await BrokerProcess.run(
            ["migrate"],
            dataDirectory: nil,
            environment: ["BROKER_DATABASE": url, "BROKER_DATA_DIR": folder]
        )
        #expect(refused.status == 4, "\(refused.output) \(refused.error)")
        #expect(refused.error.contains("999"), "\(refused.error)")
    }

    @Test("An admin command told to migrate (--migrate, BROKER_MIGRATE=on) applies the migrations and goes on")
    func toldTo() async throws {
        let data = TestBroker.temporaryDirectory()
        try SQLiteStore.migrator.migrate(try DatabaseQueue(path: data + "/broker.sqlite"), upTo: "v15-console-sessions")
        let flag = try await BrokerProcess.run(["tenant", "create", "acme", "--migrate"], dataDirectory: data)
        #expect(flag.status == 0, "\(flag.error)")
        let other = TestBroker.temporaryDirectory()
        try SQLiteStore.migrator.migrate(
            try DatabaseQueue(path: other + "/broker.sqlite"),
            upTo: "v15-console-sessions"
        )
        let environment = try await BrokerProcess.run(
            ["tenant", "create", "acme"],
            dataDirectory: other,
            environment: ["BROKER_MIGRATE": "on"]
        )
        #expect(environment.status == 0, "\(environment.error)")
        let bad = try await BrokerProcess.run(
            ["tenant", "list"],
            dataDirectory: other,
            environment: ["BROKER_MIGRATE": "yes"]
        )
        #expect(bad.status != 0 && bad.error.contains("BROKER_MIGRATE must be on or off"), "\(bad.error)")
    }

    @Test("PostgreSQL: a node refuses an older schema; migrate --check and migrate work on the shared database")
    func postgres() async throws {
        let url = try await PostgresTestDatabases.make() + "?sslmode=disable"
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.migrations = .leave
        let old = try await PostgresStore(configuration: configuration, logger: Logger(label: "upgrade-tests"))
        // All but the latest migration: this release's node must refuse the schema until it is applied.
        let latest = try #require(PostgresStore.migrations.last)
        try await old.migrate(upTo: latest.version - 1)
        let environment = ["BROKER_DATABASE": url]
        let data = TestBroker.temporaryDirectory()
        // A migration that cannot finish (another session holds the migrations' lock) ends at the deadline.
        let stuck = try await old.withConnection(operation: "write", deadline: .seconds(60)) { connection in
            try await connection.query("SELECT pg_advisory_lock(\(PostgresStore.migrationLock))", logger: old.logger)
            let stuck = try await BrokerProcess.run(
                ["migrate", "--deadline-seconds", "1"],
                dataDirectory: data,
                environment: environment
            )
            try await connection.query("SELECT pg_advisory_unlock(\(PostgresStore.migrationLock))", logger: old.logger)
            return stuck
        }
        #expect(stuck.status == 3 && stuck.error.contains("did not finish within 1"), "\(stuck.error)")
        await old.close()
        let serve = try await BrokerProcess.run(
            ["serve", "--listen", "127.0.0.1:0"],
            dataDirectory: data,
            environment: environment
        )
        #expect(serve.status != 0 && serve.error.contains("(\(latest.version) \(latest.name))"), "\(serve.error)")
        let check = try await BrokerProcess.run(["migrate", "--check"], dataDirectory: data, environment: environment)
        #expect(
            check.status == 2 && check.output.contains("1 pending migration:\n  \(latest.version) \(latest.name):"),
            "\(check.output)"
        )
        let applied = try await BrokerProcess.run(["migrate"], dataDirectory: data, environment: environment)
        #expect(applied.status == 0 && applied.output.contains("applied 1 in"), "\(applied.output) \(applied.error)")
        #expect(
            try await BrokerProcess.run(["tenant", "create", "acme"], dataDirectory: data, environment: environment)
                .status
                == 0
        )
    }
}
