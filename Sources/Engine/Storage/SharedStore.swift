import Foundation

/// A store several broker nodes share: what it holds for this node, for `/inspect` and `/metrics`.
public protocol SharedStore: Sendable {
    func sharedState() async throws -> SharedStoreState
}

/// This node's part of a shared store.
public struct SharedStoreState: Sendable, Equatable {
    /// The database, without its password.
    public var database: String
    /// Due rows this node's scheduler has claimed and not yet committed.
    public var claims: Int
    /// Unsettled deliveries leased to this node (it is pushing them).
    public var leases: Int
    /// The connection pool: connections lent out, callers waiting for one, and its size.
    public var poolInUse: Int
    public var poolWaiting: Int
    public var poolSize: Int

    public init(database: String, claims: Int, leases: Int, poolInUse: Int, poolWaiting: Int, poolSize: Int) {
        self.database = database
        self.claims = claims
        self.leases = leases
        self.poolInUse = poolInUse
        self.poolWaiting = poolWaiting
        self.poolSize = poolSize
    }
}
