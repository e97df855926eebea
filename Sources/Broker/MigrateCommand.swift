import ArgumentParser
import Engine
import Foundation
import Logging

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract:
            "Apply the schema migrations the store lacks: once per upgrade, before the new release's nodes start.",
        discussion: """
            Migrations only add (expand/contract): nodes of the previous release keep working on the new schema, \
            so run this while they serve, then roll the nodes. Nodes and admin commands never migrate on their own \
            (unless started with --migrate); a store that lacks migrations is refused with their names. On \
            PostgreSQL the migrations run under an advisory lock, each in its own transaction, with a 10-minute \
            statement limit. --check lists what is pending and the rows each migration reads, rewrites or indexes, \
            and changes nothing; it exits with status 2 when migrations are pending. A database with migrations \
            this broker does not know (a newer release applied them) is refused with exit status 4.
            """
    )

    @OptionGroup var common: CommonOptions

    @Flag(help: "List the pending migrations and the rows each one touches; change nothing (exit status 2 if any).")
    var check = false

    @Option(
        help: """
            Give up after this many seconds (exit status 3): the migration in progress is rolled back, those \
            before it stay applied.
            """
    )
    var deadlineSeconds = 1800

    func validate() throws {
        guard (1...86_400).contains(deadlineSeconds) else { throw ValidationError("--deadline-seconds: 1-86400") }
    }

    func run() async throws {
        var settings = try BrokerSettings(options: common)
        settings.migrations = .leave
        let logger = bootstrapLogging(min(settings.logLevel, .notice))
        // Ending the process ends the transaction in progress (PostgreSQL rolls back a closed connection's
        // transaction, SQLite its journal); each applied migration committed on its own.
        let deadline = Duration.seconds(deadlineSeconds)
        let watchdog = Task.detached {
            try await Task.sleep(for: deadline)
            FileHandle.standardError.write(Data("Error: the migrations did not finish within \(deadline)\n".utf8))
            Foundation.exit(3)
        }
        defer { watchdog.cancel() }
        var pendingFound = false
        try await withStore(settings, logger: logger) { store, _ in pendingFound = try await report(store) }
        if check && pendingFound { throw ExitCode(2) }
    }

    /// Prints what is pending and, unless checking, applies it; whether anything was pending.
    private func report(_ store: any BrokerStore) async throws -> Bool {
        let twins = try await store.caseTwins()
        if !twins.isEmpty {
            print("usernames that differ only in case, kept apart (each signs in with its exact spelling; rename or")
            print("delete all but one to let it sign in in any case):")
            for group in twins { print("  \(group)") }
        }
        // Roll forward, not back: a database a newer release migrated is not this release's to touch, and an
        // orchestrator must not read "up to date" as success.
        let unknown = try await store.unknownMigrations()
        guard unknown.isEmpty else {
            FileHandle.standardError.write(
                Data(
                    """
                    Error: the database has \(unknown.count) migration\(unknown.count == 1 ? "" : "s") this broker does \
                    not know (\(unknown.joined(separator: ", "))): a newer release applied them. Run that release's \
                    broker migrate, or roll the nodes forward; this release does not migrate a newer schema.

                    """.utf8
                )
            )
            throw ExitCode(4)
        }
        let pending = try await store.pendingMigrations()
        guard !pending.isEmpty else {
            let current = try await store.schemaNames().last ?? "none"
            print("the schema is up to date (latest migration: \(current))")
            return false
        }
        print("\(pending.count) pending migration\(pending.count == 1 ? "" : "s"):")
        for migration in pending { print("  \(migration)") }
        guard !check else { return true }
        let started = ContinuousClock.now
        let applied = try await store.applyMigrations()
        let elapsed = started.duration(to: .now)
        print(
            "applied \(applied.count) in \(elapsed.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))"
        )
        return true
    }
}
