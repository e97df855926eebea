import GRDB

/// Holds a SQLite file's write lock from outside the process under test, as another writer would.
///
/// Taking the lock waits (up to `patience` seconds) for a write the process under test has in progress: on a busy
/// machine a test that took it with no wait failed with "database is locked" at the moment a dispatch was writing.
public struct SQLiteWriteLock: Sendable {
    let queue: DatabaseQueue

    public static func take(path: String, patience: Double = 30) async throws -> SQLiteWriteLock {
        var configuration = Configuration()
        configuration.allowsUnsafeTransactions = true  // the transaction stays open between the two accesses
        configuration.busyMode = .timeout(patience)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try await queue.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
        return SQLiteWriteLock(queue: queue)
    }

    public func release() async throws {
        try await queue.writeWithoutTransaction { try $0.execute(sql: "ROLLBACK") }
    }
}
