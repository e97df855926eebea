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
            abstract: "Back up an embedded deployment while the broker serves: its SQLite file, or (--into) all of it.",
            discussion: """
                --into DIR writes a complete backup folder DIR/impulse-broker-<UTC time>: the SQLite file, the media \
                folder, the TLS pair, a manifest with the credential key's fingerprint (the key itself only with \
                --with-credential-key), keeps the newest --keep of them, and records the time in the data directory \
                (broker_backup_last_success_timestamp_seconds). The deployment is found as `serve` finds it \
                (--config, --data-dir, the environment). --from FILE --to FILE backs up the SQLite file alone. Either \
                way it is SQLite's online backup of one consistent snapshot, checked (integrity, schema) before it \
                appears under its name, and never overwrites. PostgreSQL deployments use pg_basebackup with WAL \
                archiving, or pg_dump (README, "Backups").
                """
        )

        @OptionGroup var common: CommonOptions
        @Option(help: "A folder for complete backups (one subfolder each).") var into: String?
        @Option(help: "With --into: the backups kept, newest first (default 14).") var keep = 14
        @Flag(help: "With --into: include the credential key (mode 0600) rather than its fingerprint only.")
        var withCredentialKey = false
        @Option(help: "The SQLite file (the broker's <dataDirectory>/broker.sqlite).") var from: String?
        @Option(help: "The backup file to write (must not exist).") var to: String?

        func validate() throws {
            guard (into == nil) != (from == nil || to == nil) else {
                throw ValidationError("give --into DIR, or --from FILE --to FILE")
            }
            guard (1...10_000).contains(keep) else { throw ValidationError("--keep: 1-10000") }
        }

        func run() async throws {
            do {
                if let into {
                    let backup = DataBackup(settings: try BrokerSettings(options: common))
                    let (path, manifest) = try backup.take(
                        into: into,
                        keep: keep,
                        withCredentialKey: withCredentialKey
                    )
                    print(
                        "backed up to \(path): schema \(manifest.schema), \(manifest.tenants) tenants, "
                            + "\(manifest.users) users, \(manifest.deliveries) deliveries, \(manifest.mediaFiles) media "
                            + "files, TLS pair \(manifest.tls ? "included" : "none"), credential key "
                            + (manifest.credentialKeyIncluded
                                ? "included" : manifest.credentialKeySHA256 == nil ? "none" : "fingerprint only")
                    )
                    return
                }
                guard let from, let to else { return }
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
            abstract: "Put a backup in place for an embedded deployment (stop its broker first).",
            discussion: """
                --from a backup folder (store backup --into) restores the SQLite file, the media folder and the TLS \
                pair into the deployment that --config/--data-dir name, after checking that its credential key opens \
                the backup's uploaded credentials. --from a backup file with --to restores the SQLite file alone. \
                Refused while a process has the file open. The backup is checked (integrity, a schema this broker \
                knows) before anything moves; the file it replaces is never opened (it may be damaged) and is kept \
                as <file>.before-restore-<time> with its -wal; a restore that fails leaves things as they were. \
                Deliveries recorded after the backup are not in it, and the day's dispatch goes on from there.
                """
        )

        @OptionGroup var common: CommonOptions
        @Option(help: "The backup: a folder from store backup --into, or a backup file.") var from: String
        @Option(help: "With a backup file: the SQLite file to replace or create (<dataDirectory>/broker.sqlite).")
        var to: String?
        @Flag(help: "Restore although the configured credential key is not the backup's (re-upload credentials).")
        var acceptOtherCredentialKey = false

        func run() async throws {
            do {
                var isFolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: from, isDirectory: &isFolder) else {
                    throw CommandFailure("no backup at \(from)")
                }
                if isFolder.boolValue {
                    let backup = DataBackup(settings: try BrokerSettings(options: common))
                    for line in try backup.restore(from: from, acceptOtherKey: acceptOtherCredentialKey) {
                        print(line)
                    }
                    print("restored \(from); start the broker")
                    return
                }
                guard let to else { throw CommandFailure("--to: the SQLite file to restore the backup file into") }
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
