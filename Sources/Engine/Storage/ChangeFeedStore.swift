import Foundation

/// The store's change feed: writes that caches in other processes (admin commands, other nodes) must see.
public protocol ChangeFeedStore: Sendable {
    /// Identifies this process in the change feed, so that it can skip its own changes.
    var nodeID: String { get }
    /// Changes that other processes' caches must see (credentials, catalog, ledger), oldest first, at most `limit`.
    func changes(after sequence: Int64, limit: Int) async throws -> [StoreChange]
    /// The newest change's sequence (0 when there is none).
    func latestChangeSequence() async throws -> Int64
    /// Forgets changes older than `date`; returns how many.
    func pruneChanges(before date: Date) async throws -> Int
    /// Returns when another process announces a change, or after `timeout`: a store that announces changes
    /// (PostgreSQL's `NOTIFY`) wakes its follower early; polling every `timeout` remains the safety net.
    func waitForChanges(upTo timeout: Duration) async
    /// Throws unless the store can take a write now (for readiness): SQLite's write lock within its busy timeout,
    /// a PostgreSQL connection that answers.
    func probeWrite() async throws
}

extension ChangeFeedStore {
    public func waitForChanges(upTo timeout: Duration) async {
        try? await Task.sleep(for: timeout)
    }
}
