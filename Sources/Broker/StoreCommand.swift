import ArgumentParser
import Engine
import Foundation
import Logging

struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Back up, restore, or move a deployment's store.",
        subcommands: [Copy.self, Backup.self, Restore.self]
    )

    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy an embedded deployment (a SQLite file) into a PostgreSQL database and verify the counts.",
            discussion: """
                Copies tenants, users, catalogs, devices, deliveries, schedules and reminders in one transaction, \
                keeping every id. Stop the broker that uses the SQLite file first. The password comes from \
                BROKER_DATABASE_PASSWORD or the file BROKER_DATABASE_PASSWORD_FILE names, never from a flag.
                """
        )

        @Option(help: "The SQLite file (the broker's <dataDirectory>/broker.sqlite).") var from: String
        @Option(help: "The PostgreSQL database: postgres://user@host:port/database?sslmode=...") var to: String
        @Flag(help: "Empty the target database first (without it, a database that holds data is refused).")
        var replace = false
        @Option(help: "Log level (default warning).") var logLevel = "warning"

        func run() async throws {
            guard FileManager.default.fileExists(atPath: from) else {
                throw CommandFailure("no SQLite file at \(from)")
            }
            let logger = bootstrapLogging(Logger.Level(rawValue: logLevel) ?? .warning)
            do {
                let environment = ProcessInfo.processInfo.environment
                let target = try DatabaseSetting(
                    to,
                    password: try BrokerSettings.databasePassword(environment: environment, file: ConfigFile())
                )
                guard case .postgres(let configuration) = target else {
                    throw CommandFailure("--to must be a postgres:// URL")
                }
                let source = try await SQLiteStore(configuration: .init(path: from), logger: logger)
                let store = try await PostgresStore(configuration: configuration, logger: logger)
                let report: StoreCopyReport
                do {
                    report = try await store.copy(fromSQLite: source, replace: replace)
                } catch {
                    await store.close()
                    throw error
                }
                await store.close()
                for table in report.tables {
                    print("\(table.name): \(table.source) copied, \(table.target) in the target")
                }
                print("copied \(from) to \(configuration.redacted); the counts match")
            } catch let error as EngineError {
                throw CommandFailure(error.message)
            }
        }
    }

    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Back up an embedded deployment's SQLite file while the broker serves.",
            discussion: """
                SQLite's online backup of one consistent snapshot; the broker keeps writing meanwhile. The backup is \
                checked (integrity, schema) before it appears under its name, and never overwrites a file. \
                PostgreSQL deployments use pg_dump or pg_basebackup (README, "Backups").
                """
        )

        @Option(help: "The SQLite file (the broker's <dataDirectory>/broker.sqlite).") var from: String
        @Option(help: "The backup file to write (must not exist).") var to: String

        func run() async throws {
            do {
                let report = try SQLiteBackup.backup(from: from, to: to)
                print(
                    "backed up \(from) to \(to): \(report.bytes) bytes, schema \(report.schema), \(report.tenants) tenants, "
                        + "\(report.users) users, \(report.deliveries) deliveries"
                )
            } catch let error as EngineError {
                throw CommandFailure(error.message)
            }
        }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put a backup in place as the SQLite file a broker starts on (stop that broker first).",
            discussion: """
                Checks the backup (integrity, a schema this broker knows), keeps the file it replaces as \
                <file>.before-restore-<time>, and puts the backup's copy in place. Start the broker on it: \
                deliveries recorded after the backup are not in it, and the day's dispatch goes on from there.
                """
        )

        @Option(help: "The backup file.") var from: String
        @Option(help: "The SQLite file to replace or create (the broker's <dataDirectory>/broker.sqlite).") var to:
            String

        func run() async throws {
            do {
                let (report, kept) = try SQLiteBackup.restore(from: from, to: to)
                if let kept { print("kept the replaced file as \(kept)") }
                print(
                    "restored \(from) to \(to): schema \(report.schema), \(report.tenants) tenants, \(report.users) users, "
                        + "\(report.deliveries) deliveries"
                )
            } catch let error as EngineError {
                throw CommandFailure(error.message)
            }
        }
    }
}
