import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An advisory lock (`flock`) on `<database>.lock` beside an embedded store's SQLite file: every process that opens
/// the store holds it shared for as long as it has the store open, and `broker store restore` takes it exclusive
/// while it swaps the file. So a restore refuses while a broker (or an admin command) has the file open, instead of
/// replacing the file under a running process that then silently loses its later writes; and a process cannot open
/// the store in the middle of a restore. The kernel drops the lock when its process ends, however it ends (a kill
/// leaves nothing to clean up). A lock file of its own: SQLite's own locks on the database file are left alone.
public final class StoreFileLock: Sendable {
    private let descriptor: Int32

    /// The lock file of the database at `path`.
    public static func path(of database: String) -> String { database + ".lock" }

    /// Takes the lock without waiting; throws a conflict naming what holds it.
    public init(database: String, exclusive: Bool) throws(EngineError) {
        let path = Self.path(of: database)
        // Read-only is enough for flock, so a lock file another user created (root's restore) still locks.
        let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw EngineError(.storage, "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            close(descriptor)
            if !busy { throw EngineError(.storage, "cannot lock \(path): \(String(cString: strerror(errno)))") }
            throw EngineError(
                .conflict,
                exclusive
                    ? "a process has \(database) open (a running broker, or an admin command): stop it first"
                    : "\(database) is being restored (broker store restore holds \(path)): start again once it is done"
            )
        }
        self.descriptor = descriptor
    }

    deinit {
        close(descriptor)
    }
}
