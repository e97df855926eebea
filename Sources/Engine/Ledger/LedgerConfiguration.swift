/// Configuration of the delivery ledger.
public struct LedgerConfiguration: Sendable {
    /// Independent actors; a user always maps to the same one, so users on different shards never contend.
    public var shardCount: Int
    /// Newest deliveries kept in memory per user: the first page of a list is served without a store read.
    public var hotItemsPerUser: Int
    /// Users kept in memory per shard; the least recently used are dropped beyond it.
    public var cachedUsersPerShard: Int

    public init(shardCount: Int = 16, hotItemsPerUser: Int = 20, cachedUsersPerShard: Int = 20_000) {
        self.shardCount = max(1, shardCount)
        self.hotItemsPerUser = max(1, hotItemsPerUser)
        self.cachedUsersPerShard = max(1, cachedUsersPerShard)
    }
}
