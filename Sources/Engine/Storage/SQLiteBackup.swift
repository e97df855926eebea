import Foundation
import GRDB

/// Backups of an embedded deployment's SQLite file, taken while the broker serves, and their restore.
///
/// A backup is SQLite's online backup of one read transaction: a consistent snapshot that does not stop the
/// broker's writer (WAL mode). It is written beside its target and renamed into place once SQLite's integrity check
/// passes, so a backup file is whole or absent. A restore checks the backup the same way and that this broker knows
/// its schema, keeps the file it replaces, and renames the backup's copy into place.
public enum SQLiteBackup {
    /// What a backup or restore holds.
    public struct Report: Sendable, Equatable {
        /// The newest migration the file has.
        public var schema: String
        public var tenants: Int
        public var users: Int
        public var deliveries: Int
        public var bytes: Int
    }

    /// Backs `source` up into `target` (a new file; an existing one is refused).
    public static func backup(from source: String, to target: String) throws -> Report {
        guard FileManager.default.fileExists(atPath: source) else {
            throw EngineError(.invalidInput, "no SQLite file at \(source)")
        }
        guard !FileManager.default.fileExists(atPath: target) else {
            throw EngineError(.conflict, "\(target) exists; a backup never overwrites a file")
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        let reader = try DatabasePool(path: source, configuration: configuration)
        let partial = target + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        do {
            let destination = try DatabaseQueue(path: partial)
            try reader.backup(to: destination)
            try destination.close()
            try reader.close()
            let report = try check(partial)
            try FileManager.default.moveItem(atPath: partial, toPath: target)
            return report
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
    }

    /// Puts the backup `backup` in place as `target` (the broker using it must be stopped). A file already there is
    /// kept as `<target>.before-restore-<unix time>`, with its WAL folded in; the returned path says where (nil:
    /// there was none).
    public static func restore(from backup: String, to target: String) throws -> (report: Report, kept: String?) {
        let report = try check(backup)
        let incoming = target + ".restoring"
        try? FileManager.default.removeItem(atPath: incoming)
        try FileManager.default.copyItem(atPath: backup, toPath: incoming)
        var kept: String?
        if FileManager.default.fileExists(atPath: target) {
            let aside = target + ".before-restore-\(Int(Date().timeIntervalSince1970))"
            // A checkpoint folds the WAL into the file, so the kept copy is whole without its -wal.
            let old = try DatabaseQueue(path: target)
            try old.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try old.close()
            try FileManager.default.moveItem(atPath: target, toPath: aside)
            kept = aside
        }
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: target + suffix) }
        try FileManager.default.moveItem(atPath: incoming, toPath: target)
        return (report, kept)
    }

    /// Checks a file is a whole broker database whose schema this broker knows.
    public static func check(_ path: String) throws -> Report {
        var configuration = Configuration()
        configuration.readonly = true
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw EngineError(.invalidInput, "\(path) is not a SQLite database")
        }
        defer { try? queue.close() }
        let known = Set(SQLiteStore.migrator.migrations)
        let report: Report = try queue.read { db in
            guard try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok" else {
                throw EngineError(.invalidInput, "\(path) fails SQLite's integrity check")
            }
            guard try db.tableExists("grdb_migrations"), try db.tableExists("deliveries") else {
                throw EngineError(.invalidInput, "\(path) is not a broker database")
            }
            let applied = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
            if let unknown = applied.first(where: { !known.contains($0) }) {
                throw EngineError(
                    .invalidInput,
                    "\(path) has migration \(unknown), which this broker does not know: restore with a newer broker"
                )
            }
            return Report(
                schema: SQLiteStore.migrator.migrations.last { applied.contains($0) } ?? "none",
                tenants: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tenants") ?? 0,
                users: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM users") ?? 0,
                deliveries: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM deliveries") ?? 0,
                bytes: 0
            )
        }
        var sized = report
        sized.bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        return sized
    }
}
