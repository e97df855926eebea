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
            // The copy carries the source's WAL mode; a backup is one self-contained file, without a -wal or -shm
            // beside it (they were left next to every backup under the temporary name).
            try destination.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode = DELETE") }
            try destination.close()
            try reader.close()
            let report = try check(partial)
            try FileManager.default.moveItem(atPath: partial, toPath: target)
            return report
        } catch {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                try? FileManager.default.removeItem(atPath: partial + suffix)
            }
            throw error
        }
    }

    /// Puts the backup `backup` in place as `target`. Refused while a process has `target` open (a running broker:
    /// it would go on writing to the file it has open and lose those writes); the backup is checked first, copied
    /// beside the target, then renamed into place. A file already there is never opened (it may be the damaged file
    /// the restore is for): it is kept as `<target>.before-restore-<unix time>`, with its `-wal` and `-shm` renamed
    /// to match, so that SQLite opening the kept copy finds its WAL; the returned path says where (nil: there was
    /// none). A restore that fails leaves the target as it was and nothing of its own behind.
    /// `locked`: the caller holds `target`'s ``StoreFileLock`` exclusive (it restores more than the file).
    public static func restore(
        from backup: String,
        to target: String,
        locked: Bool = false
    ) throws -> (report: Report, kept: String?) {
        let report = try check(backup)
        let lock = locked ? nil : try StoreFileLock(database: target, exclusive: true)
        defer { withExtendedLifetime(lock) {} }
        let manager = FileManager.default
        let incoming = target + ".restoring"
        let clear = {
            for suffix in ["", "-wal", "-shm", "-journal"] { try? manager.removeItem(atPath: incoming + suffix) }
        }
        clear()
        defer { clear() }
        do {
            try manager.copyItem(atPath: backup, toPath: incoming)
            // In WAL mode, as the broker keeps it: a broker starting on it, and any reader beside it, find the file
            // as they expect rather than switching its mode under each other.
            let copy = try DatabaseQueue(path: incoming)
            try copy.writeWithoutTransaction { try $0.execute(sql: "PRAGMA journal_mode = WAL") }
            try copy.close()
        } catch {
            throw EngineError(.storage, "cannot copy \(backup) beside \(target): \(error.localizedDescription)")
        }
        // The files a SQLite database is made of, each moved aside or not there.
        let parts = ["", "-wal", "-shm"]
        var kept: String?
        var moved: [(from: String, to: String)] = []
        if manager.fileExists(atPath: target) {
            let aside = target + ".before-restore-\(Int(Date().timeIntervalSince1970))"
            do {
                for suffix in parts where manager.fileExists(atPath: target + suffix) {
                    try manager.moveItem(atPath: target + suffix, toPath: aside + suffix)
                    moved.append((target + suffix, aside + suffix))
                }
            } catch {
                for (from, to) in moved.reversed() { try? manager.moveItem(atPath: to, toPath: from) }
                throw EngineError(.storage, "cannot move \(target) aside: \(error.localizedDescription)")
            }
            kept = aside
        } else {
            // A WAL without its database is no part of the backup being restored.
            for suffix in ["-wal", "-shm"] { try? manager.removeItem(atPath: target + suffix) }
        }
        do {
            try manager.moveItem(atPath: incoming, toPath: target)
        } catch {
            for (from, to) in moved.reversed() { try? manager.moveItem(atPath: to, toPath: from) }
            throw EngineError(.storage, "cannot put the backup in place as \(target): \(error.localizedDescription)")
        }
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
