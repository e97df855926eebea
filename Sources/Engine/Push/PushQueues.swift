import DequeModule

/// The push gateway's queues as one value: each tenant's deliveries waiting for a push, the rotation that takes
/// tenants in turn, the deliveries queued or in flight (a second enqueue of one is ignored), paused tenants and
/// the deliveries their pause put back. Pure: the gateway actor holds it and keeps only the waiting (producers
/// waiting for room, idle workers) to itself.
struct PushQueues {
    /// A queued push: the delivery and, when the producer read it ahead, its devices and badge.
    struct Job {
        var delivery: Delivery
        var target: PushTarget?
    }

    let capacityPerTenant: Int
    private(set) var queues: [TenantID: Deque<Job>] = [:]
    /// Tenants with a queue, in the order they are served next.
    private(set) var rotation: Deque<TenantID> = []
    /// Every tenant that has had a queue: its depth reads 0 when empty, rather than not at all.
    private(set) var servedTenants: Set<TenantID> = []
    /// Deliveries queued or in flight.
    private(set) var pending: Set<DeliveryID> = []
    /// Deliveries a paused tenant put back into its queue while their push was running.
    private var requeued: Set<DeliveryID> = []
    /// Paused tenants and why (a refused credential), until an operator's change resumes them.
    private(set) var paused: [TenantID: String] = [:]

    init(capacityPerTenant: Int) {
        self.capacityPerTenant = capacityPerTenant
    }

    /// Room left in a tenant's queue.
    func room(_ tenant: TenantID) -> Int { capacityPerTenant - (queues[tenant]?.count ?? 0) }

    func isPending(_ delivery: DeliveryID) -> Bool { pending.contains(delivery) }

    /// Queues one delivery; false when it is already queued or in flight (the caller checked for room).
    mutating func append(_ delivery: Delivery, target: PushTarget?) -> Bool {
        guard pending.insert(delivery.id).inserted else { return false }
        if queues[delivery.tenant] == nil { rotate(delivery.tenant) }
        queues[delivery.tenant, default: []].append(Job(delivery: delivery, target: target))
        return true
    }

    /// Queues the run of one tenant's deliveries that starts at `next`, as far as its queue has room; returns
    /// where the run stopped and how many were queued (duplicates are skipped, and do not take room).
    ///
    /// The queue is looked up once per run and each id hashed once (one by one was 2.6% of the gateway's time);
    /// it is moved out and back, so it stays uniquely referenced and is appended to in place.
    mutating func appendRun(
        _ items: [(delivery: Delivery, target: PushTarget?)],
        from next: Int
    ) -> (next: Int, added: Int) {
        let tenant = items[next].delivery.tenant
        let room = room(tenant)
        let wasQueued = queues[tenant] != nil
        var queue = queues.removeValue(forKey: tenant) ?? []
        var index = next
        var added = 0
        while index < items.endIndex, added < room, items[index].delivery.tenant == tenant {
            if pending.insert(items[index].delivery.id).inserted {
                queue.append(Job(delivery: items[index].delivery, target: items[index].target))
                added += 1
            }
            index += 1
        }
        // A tenant is in the rotation exactly while it has a queue.
        if wasQueued || added > 0 { queues[tenant] = queue }
        if !wasQueued && added > 0 { rotate(tenant) }
        return (index, added)
    }

    /// The next batch (up to `batchSize` deliveries, all of one tenant), taking tenants in turn and skipping paused
    /// ones; nil when none is waiting. A tenant whose queue ran empty leaves the rotation.
    mutating func takeBatch(_ batchSize: Int) -> (tenant: TenantID, jobs: [Job])? {
        for _ in 0..<rotation.count {
            guard let tenant = rotation.popFirst() else { break }
            guard let depth = queues[tenant]?.count, depth > 0 else {
                queues[tenant] = nil
                continue
            }
            rotation.append(tenant)
            if paused[tenant] != nil { continue }
            var jobs: [Job] = []
            jobs.reserveCapacity(min(depth, batchSize))
            // Popped in place: copying the queue out and back would copy every waiting delivery.
            while jobs.count < batchSize, let job = queues[tenant]?.popFirst() { jobs.append(job) }
            return (tenant, jobs)
        }
        return nil
    }

    /// A delivery's push is done: it leaves the pending set, unless a pause put it back in its queue.
    mutating func finished(_ delivery: DeliveryID) {
        // Nearly always none is requeued: looking first saves hashing every push's id a third time.
        if requeued.isEmpty || requeued.remove(delivery) == nil { pending.remove(delivery) }
    }

    /// Pauses a tenant (its credential was refused) and puts the delivery whose push met it back at the head of
    /// its queue, once however many of its devices were stopped. Returns whether the tenant was running before.
    mutating func pause(_ tenant: TenantID, reason: String, requeue delivery: Delivery) -> Bool {
        let wasRunning = paused[tenant] == nil
        paused[tenant] = reason
        guard !requeued.contains(delivery.id) else { return wasRunning }
        if queues[tenant] == nil { rotate(tenant) }
        // Devices are read again when it is retried: they may change while the tenant is paused.
        queues[tenant, default: []].prepend(Job(delivery: delivery, target: nil))
        requeued.insert(delivery.id)
        return wasRunning
    }

    mutating func resume(_ tenant: TenantID) {
        paused[tenant] = nil
    }

    /// Drops every queued delivery (they stay unsettled in the ledger); returns how many. Those in flight stay
    /// pending until they finish.
    mutating func dropAll() -> Int {
        var dropped = 0
        for queue in queues.values {
            for job in queue { pending.remove(job.delivery.id) }
            dropped += queue.count
        }
        queues.removeAll()
        rotation.removeAll()
        return dropped
    }

    /// Queue depth per tenant that has had a queue (0 when empty).
    var depths: [TenantID: Int] {
        var depths = [TenantID: Int](minimumCapacity: servedTenants.count)
        for tenant in servedTenants { depths[tenant] = queues[tenant]?.count ?? 0 }
        return depths
    }

    /// Whether nothing waits for a push but a paused tenant's queue (which waits for an operator).
    var onlyPausedWait: Bool {
        queues.allSatisfy { tenant, queue in queue.isEmpty || paused[tenant] != nil }
    }

    private mutating func rotate(_ tenant: TenantID) {
        rotation.append(tenant)
        servedTenants.insert(tenant)
    }
}
