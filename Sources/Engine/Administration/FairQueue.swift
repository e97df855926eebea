/// Jobs queued per key (a tenant) and taken in turns, one key after the other: a key with a thousand jobs
/// waiting delays another key's one job by at most one job per key ahead of it. Bounded per key. A pure value.
public struct FairQueue<Key: Hashable & Sendable, Job: Sendable>: Sendable {
    /// Jobs one key may have waiting; more are refused.
    public let capacityPerKey: Int
    private var queues: [Key: [(id: UInt64, job: Job)]] = [:]
    /// Keys with jobs waiting, in the order they take their turns.
    private var turns: [Key] = []
    private var nextID: UInt64 = 0

    public init(capacityPerKey: Int) {
        self.capacityPerKey = max(1, capacityPerKey)
    }

    public var count: Int { queues.values.reduce(0) { $0 + $1.count } }
    public func count(_ key: Key) -> Int { queues[key]?.count ?? 0 }

    /// Queues `job` under `key`; its id (for ``remove(_:key:)``), or nil when the key's queue is full.
    public mutating func enqueue(_ job: Job, key: Key) -> UInt64? {
        guard count(key) < capacityPerKey else { return nil }
        defer { nextID &+= 1 }
        if queues[key] == nil {
            queues[key] = []
            turns.append(key)
        }
        queues[key]?.append((nextID, job))
        return nextID
    }

    /// The next job: the oldest of the key whose turn it is; that key then goes to the back.
    public mutating func next() -> Job? {
        guard !turns.isEmpty else { return nil }
        let key = turns.removeFirst()
        guard var queue = queues[key], !queue.isEmpty else {
            queues[key] = nil
            return next()
        }
        let (_, job) = queue.removeFirst()
        if queue.isEmpty {
            queues[key] = nil
        } else {
            queues[key] = queue
            turns.append(key)
        }
        return job
    }

    /// Takes a job out before it ran (its caller went); the job, or nil when it was taken already.
    public mutating func remove(_ id: UInt64, key: Key) -> Job? {
        guard let index = queues[key]?.firstIndex(where: { $0.id == id }) else { return nil }
        let job = queues[key]?.remove(at: index).job
        if queues[key]?.isEmpty == true {
            queues[key] = nil
            turns.removeAll { $0 == key }
        }
        return job
    }
}
