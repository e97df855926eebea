import DequeModule
import Foundation
import Logging
import Synchronization

/// Takes deliveries, pushes them to every device of their user, and reports each outcome to the ledger and the
/// token registry.
///
/// Each tenant has a bounded queue: `enqueue` suspends while its tenant's queue is full, so a fast producer (the
/// scheduler's burst) is slowed to what APNs accepts and memory stays bounded. Workers take tenants in turn, so
/// one tenant's backlog does not starve another, and a tenant whose credentials APNs rejects is paused alone.
public actor PushGateway {
    private let store: any PushGatewayStore
    private let ledger: DeliveryLedger
    let registry: TokenRegistry
    let transport: any PushTransport
    let configuration: PushGatewayConfiguration
    let logger: Logger
    let metrics: BrokerMetrics
    /// What retries wait on (a test's ``EngineClock`` moves it by hand).
    let clock: any EngineClock
    /// Tenants and impulses read once a minute, not once per push: the ledger's, which the scheduler shares.
    private var catalog: CatalogCache { ledger.catalog }

    typealias Job = PushQueues.Job

    /// The tenants' queues, their rotation, the deliveries queued or in flight, paused tenants: one value
    /// (``PushQueues``); the actor keeps only who waits on it.
    var queues: PushQueues
    var blockedProducers: [TenantID: [(id: UInt64, continuation: CheckedContinuation<Void, Never>)]] = [:]
    private var nextWaiter: UInt64 = 0
    /// Batches waiting on the clock for their resends: a stop ends each wait at once.
    var resendWaits: [UInt64: (timer: Task<Void, Never>, continuation: CheckedContinuation<Bool, Never>)] = [:]
    private var idleWorkers: [CheckedContinuation<Void, Never>] = []
    private var stopping = false
    /// This node cannot push and has handed its work back: queued pushes were dropped and none is taken.
    var shedding = false
    /// Whether pushes get through (``PushHealth``), from every answer; read by the scheduler without waiting.
    let health: Mutex<PushHealth>
    /// Places of the pushes awaiting an answer (`configuration.workers`).
    let permits: PushPermits
    public private(set) var statistics = PushStatistics()
    /// Refusals by tenant and kind: logged at once, then once a minute; shown in `/inspect`.
    var refusals = RefusalLog()
    /// Deliveries a device of which is still waiting because its channel kept failing (others of the user's may
    /// have taken the push): pushed again by the gateway itself to the waiting devices (``DeferredPushes``).
    var deferredPushes = DeferredPushes()
    /// The retry loop waiting for a first deferred delivery, or for the next one's time.
    private var deferredWaiter: CheckedContinuation<Void, Never>?
    private var deferredTimer: Task<Void, Never>?

    public init(
        store: any PushGatewayStore,
        ledger: DeliveryLedger,
        registry: TokenRegistry,
        transport: any PushTransport,
        configuration: PushGatewayConfiguration = .init(),
        logger: Logger,
        metrics: BrokerMetrics = .disabled,
        clock: any EngineClock = SystemClock()
    ) {
        self.store = store
        self.ledger = ledger
        self.registry = registry
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.clock = clock
        self.queues = PushQueues(capacityPerTenant: configuration.queueCapacityPerTenant)
        self.permits = PushPermits(configuration.workers)
        self.health = Mutex(PushHealth(window: configuration.givingUpAfter))
    }

    /// Queues a delivery's push, suspending while the tenant's queue is full. Returns false when it was not
    /// queued: already pending, the gateway is stopping, or the caller was cancelled while waiting (the delivery
    /// stays unpushed in the ledger and is pushed again later).
    @discardableResult
    public func enqueue(_ delivery: Delivery, target: PushTarget? = nil) async -> Bool {
        guard !queues.isPending(delivery.id), !shedding else { return false }
        while queues.room(delivery.tenant) <= 0, !stopping, !shedding {
            if Task.isCancelled { return false }
            nextWaiter &+= 1
            let id = nextWaiter
            await withTaskCancellationHandler {
                await withCheckedContinuation { blockedProducers[delivery.tenant, default: []].append((id, $0)) }
            } onCancel: {
                Task { await self.release(waiter: id, tenant: delivery.tenant) }
            }
        }
        guard !stopping, !shedding, !Task.isCancelled, queues.append(delivery, target: target) else { return false }
        wakeWorker()
        return true
    }

    /// Queues several deliveries in order (one hop for the caller), suspending while the tenant's queue is full.
    /// Returns how many were queued; stops early when cancelled or stopping.
    public func enqueue(contentsOf items: [(delivery: Delivery, target: PushTarget?)]) async -> Int {
        var queued = 0
        var next = items.startIndex
        while next < items.endIndex {
            if stopping || shedding || Task.isCancelled { break }
            guard queues.room(items[next].delivery.tenant) > 0 else {
                // Full: this one waits for room, as a single enqueue does.
                if await enqueue(items[next].delivery, target: items[next].target) { queued += 1 }
                next += 1
                continue
            }
            // A run of this tenant's deliveries that fits goes in at once.
            let run = queues.appendRun(items, from: next)
            next = run.next
            queued += run.added
            for _ in 0..<min(run.added, idleWorkers.count) { wakeWorker() }
        }
        return queued
    }

    private func release(waiter: UInt64, tenant: TenantID) {
        guard let index = blockedProducers[tenant]?.firstIndex(where: { $0.id == waiter }) else { return }
        blockedProducers[tenant]?.remove(at: index).continuation.resume()
    }

    /// Runs the workers until the task is cancelled; queued deliveries stay unpushed in the ledger (and are
    /// pushed again after a restart), never lost.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<configuration.batchWorkers {
                group.addTask { await self.work() }
            }
            group.addTask { await self.retryDeferred() }
            await withTaskCancellationHandler {
                await group.waitForAll()
            } onCancel: {
                Task { await self.cut() }
            }
        }
        // The outcomes of the last pushes go to disk before the process ends (else they are pushed again), also
        // when the stop was cut short: in a task of its own, which the cancellation does not reach.
        let ledger = self.ledger
        await Task { await ledger.flushOutcomes() }.value
    }

    /// Pushes the deferred deliveries again as they fall due, until the gateway stops (those still waiting then
    /// stay unsettled in the ledger for the sweep or the next start). Sleeps on the clock only while some wait, and
    /// never past the shortest pause (so that one deferred meanwhile is not late).
    private func retryDeferred() async {
        while !stopping {
            guard let next = deferredPushes.nextDue else {
                await withCheckedContinuation { deferredWaiter = $0 }
                continue
            }
            let wait = min(next.timeIntervalSince(clock.now), DeferredPushes.pauses[0])
            if wait > 0 {
                // A stop (or the task's cancellation) ends the wait at once: a graceful stop does not wait it out.
                let clock = self.clock
                let timer = Task { _ = try? await clock.sleep(for: .seconds(wait)) }
                deferredTimer = timer
                await withTaskCancellationHandler {
                    await timer.value
                } onCancel: {
                    timer.cancel()
                }
                deferredTimer = nil
            }
            for delivery in deferredPushes.takeDue(at: clock.now) where !stopping { await enqueue(delivery) }
        }
    }

    /// Deliveries whose devices were not all done because a channel kept failing: each waits for its next try.
    func deferLater(_ deliveries: [Delivery]) {
        guard !stopping, !shedding else { return }
        let left = deferredPushes.add(deliveries, at: clock.now)
        deferredWaiter?.resume()
        deferredWaiter = nil
        if left > 0 {
            logger.warning(
                "too many deferred deliveries to retry in memory: the scheduler's sweep takes the rest",
                metadata: ["left": "\(left)"]
            )
        }
    }

    /// The stop cut short (the grace period ended): says what is left unsettled, then stops at once. The pushes
    /// awaiting an answer end with the cancellation; their deliveries, and the queued ones, stay unsettled in the
    /// ledger and are pushed at the next start (or by another node) under the same collapse id.
    private func cut() {
        let queued = queues.depths.values.reduce(0, +)
        logger.warning(
            "push gateway cut short: deliveries awaiting an answer or queued are left unsettled; they are pushed at the next start or by another node",
            metadata: ["unsettled_in_flight": "\(permits.inUse)", "unsettled_queued": "\(queued)"]
        )
        stop()
    }

    /// A graceful stop: takes no more deliveries from the queues (they stay unpushed in the ledger for the next
    /// start) and ends retries at once, but lets every batch already sent have its answers and write its marks;
    /// then `run` returns. A push APNs accepted is thus marked before the process ends, unless the stop is cut
    /// short by cancelling `run`.
    public func finish() {
        if !stopping {
            logger.notice(
                "push gateway stopping: batches in flight finish",
                metadata: ["in_flight": "\(permits.inUse)"]
            )
        }
        stop()
    }

    /// Whether a graceful stop has begun (retries then end at once).
    var isStopping: Bool { stopping }

    /// Clears a tenant's configuration error so its queue moves again.
    public func resume(tenant: TenantID) {
        queues.resume(tenant)
        wakeWorker()
    }

    /// Pushes in flight at most, and deliveries per batch (for inspection).
    public nonisolated var limits: (inFlight: Int, batch: Int) { (configuration.workers, configuration.batchSize) }

    /// Queue depth, pushes awaiting APNs' answer, and the configuration error per tenant (for inspection).
    /// Queue depth per tenant (every tenant that has had a queue, 0 when empty), pushes in flight, paused tenants.
    public func snapshot() -> (queued: [TenantID: Int], inFlight: Int, paused: [TenantID: String]) {
        (queues.depths, permits.inUse, queues.paused)
    }

    private func stop() {
        stopping = true
        permits.close()
        for waiter in idleWorkers { waiter.resume() }
        idleWorkers.removeAll()
        deferredWaiter?.resume()
        deferredWaiter = nil
        deferredTimer?.cancel()
        for waiters in blockedProducers.values { for waiter in waiters { waiter.continuation.resume() } }
        blockedProducers.removeAll()
        for wait in resendWaits.values {
            wait.timer.cancel()
            wait.continuation.resume(returning: false)
        }
        resendWaits.removeAll()
    }

    func nextResendWait() -> UInt64 {
        nextWaiter &+= 1
        return nextWaiter
    }

    private func wakeWorker() {
        if !idleWorkers.isEmpty { idleWorkers.removeFirst().resume() }
    }

    /// The next deliveries (up to a batch, all of one tenant), taking tenants in turn and skipping paused ones;
    /// nil when stopping.
    private func next() async -> [Job]? {
        while !stopping {
            if let batch = queues.takeBatch(configuration.batchSize) {
                // Each delivery taken makes room for a producer waiting on this tenant.
                for _ in batch.jobs.indices {
                    guard let producer = blockedProducers[batch.tenant]?.popLast() else { break }
                    producer.continuation.resume()
                }
                return batch.jobs
            }
            await withCheckedContinuation { idleWorkers.append($0) }
        }
        return nil
    }

    private func work() async {
        while let jobs = await next() {
            await push(jobs)
            // A delivery requeued by a paused tenant is back in its queue: still pending.
            for index in jobs.indices { queues.finished(jobs[index].delivery.id) }
        }
    }

    func pause(_ tenant: TenantID, reason: String, requeue delivery: Delivery) {
        // Several devices of one delivery may be stopped in the same batch: it goes back once.
        if queues.pause(tenant, reason: reason, requeue: delivery) {
            logger.error(
                "APNs rejected the tenant's credentials; its pushes are paused",
                metadata: ["tenant.id": "\(tenant)", "push.reason": "\(reason)"]
            )
        }
    }

    func count(_ update: (inout PushStatistics) -> Void) {
        update(&statistics)
    }

    private func add(_ counts: PushStatistics) {
        statistics.accepted += counts.accepted
        statistics.rejected.merge(counts.rejected, uniquingKeysWith: +)
        statistics.transportFailures += counts.transportFailures
        statistics.retried += counts.retried
        statistics.deferred += counts.deferred
        statistics.partlyPushed += counts.partlyPushed
        statistics.withoutDevice += counts.withoutDevice
        statistics.tokensQuarantined += counts.tokensQuarantined
        statistics.tokensRemoved += counts.tokensRemoved
    }

    /// Pushes a batch of one tenant's deliveries to each of their users' devices, and executes what each
    /// outcome calls for. The common answers (accepted, or a final rejection) cost nothing per push beyond the
    /// request; retries, token removals and credential failures are handled one by one.
    private nonisolated func push(_ jobs: [Job]) async {
        guard let tenantID = jobs.first?.delivery.tenant else { return }
        do {
            guard let tenant = try await catalog.tenant(tenantID) else { return }
            // Devices and badges of the deliveries the producer did not read ahead, in one read. (Jobs are read in
            // place here and below: copying one copies its delivery's strings, 2% of the gateway's time.)
            var unread = Set<UserID>()
            for index in jobs.indices where jobs[index].target == nil { unread.insert(jobs[index].delivery.user) }
            let targets = unread.isEmpty ? [:] : try await store.pushTargets(tenant: tenantID, users: Array(unread))
            // The devices each delivery was already pushed to (a channel failed while another took it): read for
            // the deliveries held without it; the others carry it (empty for nearly all).
            let unknown = jobs.indices.filter { jobs[$0].delivery.pushedDevices == nil }.map { jobs[$0].delivery.id }
            let known = unknown.isEmpty ? [:] : try await store.pushedDevices(tenant: tenantID, deliveries: unknown)
            // Titles only: binding a whole impulse copied (and released) each of its strings for every push.
            var titles: [ImpulseID: String?] = [:]
            var sends: [(job: Int, push: OutboundPush)] = []
            // Jobs whose delivery had devices pushed before: they settle through a progress mark.
            var resumed = Set<Int>()
            var counts = PushStatistics()
            var marks: [PushSettlement] = []
            var expiries = ExpiryCache()
            let now = Date()
            for index in jobs.indices {
                let impulseID = jobs[index].delivery.impulse
                if titles[impulseID] == nil {
                    titles[impulseID] = .some(try await catalog.impulse(tenant: tenantID, id: impulseID)?.title)
                }
                // An impulse gone from the catalog: the delivery stays unsettled (as a missing tenant does).
                guard let title = titles[impulseID] ?? nil else { continue }
                let user = jobs[index].delivery.user
                let delivery = jobs[index].delivery.id
                let target = jobs[index].target ?? targets[user]
                let first = sends.count
                let pushedBefore: Set<String>
                if let carried = jobs[index].delivery.pushedDevices {
                    pushedBefore = carried
                } else if let read = known[delivery] {
                    pushedBefore = read
                } else {
                    continue  // settled meanwhile (another node, or the mark of an earlier push)
                }
                if !pushedBefore.isEmpty || jobs[index].delivery.pushedAt != nil { resumed.insert(index) }
                // APNs keeps the push for an offline phone until the end of the user's delivery day.
                let expiresAt =
                    target.map {
                        expiries.expiration(
                            tenant.pushExpiry,
                            localDate: jobs[index].delivery.localDate,
                            zone: $0.timeZone ?? tenant.defaultTimeZone,
                            now: now
                        )
                    } ?? nil
                for device in target?.devices ?? []
                where device.quarantinedAt == nil && !pushedBefore.contains(device.token.rawValue) {
                    let push = OutboundPush(
                        tenant: tenantID,
                        delivery: delivery,
                        device: device,
                        title: title,
                        badge: target?.unreadCount ?? 0,
                        impulse: impulseID,
                        expiresAt: expiresAt
                    )
                    sends.append((index, push))
                }
                if sends.count == first, resumed.contains(index) {
                    // Every device it still had to go to is done (or gone): settled.
                    marks.append(
                        PushSettlement(
                            tenant: tenantID,
                            user: user,
                            delivery: delivery,
                            apnsID: nil,
                            progress: ([], true)
                        )
                    )
                } else if sends.count == first {
                    counts.withoutDevice += 1
                    marks.append(
                        PushSettlement(tenant: tenantID, user: user, delivery: delivery, apnsID: nil, noDevice: true)
                    )
                }
            }
            var answers: [PushAnswer] = []
            // Deliveries whose pushed mark went to the ledger as their devices accepted them, by job.
            var devicesPerJob = [Int](repeating: 0, count: jobs.count)
            // The channels of each job's devices: an early mark waits for all of them, so it names them all.
            var channelsPerJob = [PushChannels](repeating: [], count: jobs.count)
            for position in sends.indices {
                devicesPerJob[sends[position].job] += 1
                channelsPerJob[sends[position].job].insert(PushChannels(sends[position].push.device.channel))
            }
            // A delivery pushed to some devices before is never marked early: its mark is a progress mark, written
            // with the batch's.
            for index in resumed { devicesPerJob[index] = .max }
            let early = EarlyMarks(devices: devicesPerJob)
            if !sends.isEmpty {
                // Stopping: the deliveries stay unsettled and are pushed at the next start.
                guard await permits.acquire(sends.count) else { return }
                let held = HeldPlaces(sends.count)
                let permits = self.permits
                let ledger = self.ledger
                let owners = sends.map { (job: $0.job, user: jobs[$0.job].delivery.user, delivery: $0.push.delivery) }
                let channels = channelsPerJob
                answers = await transport.send(batch: sends.map(\.push)) { index, acceptedID in
                    permits.release(held.take(1))
                    // Recorded at once, not when the batch's slowest answer comes: a crash in between would
                    // otherwise send it again at the next start.
                    guard let acceptedID,
                        let recorded = early.claim(
                            owners[index].job,
                            index: index,
                            delivery: owners[index].delivery,
                            acceptedID
                        )
                    else { return }
                    let owner = owners[index]
                    ledger.recordAccepted(
                        PushSettlement(
                            tenant: tenantID,
                            user: owner.user,
                            delivery: owner.delivery,
                            apnsID: recorded,
                            channels: channels[owner.job]
                        )
                    )
                }
                permits.release(held.takeAll())
            }
            let tally = try await settle(answers, sends: sends, jobs: jobs, tenant: tenant, counts: &counts)
            let settledAt = Date()
            var lags: [Double] = []
            var retryLater: [Delivery] = []
            // `sends` is in job order: each job's devices together, jobs in order.
            var start = sends.startIndex
            while start < sends.endIndex {
                let index = sends[start].job
                var end = start
                while end < sends.endIndex, sends[end].job == index { end += 1 }
                defer { start = end }
                // A delivery is settled only when each of its devices has its outcome: accepted, gone, refused for
                // good. One still waiting (its channel kept failing, a resend the stop cut short) keeps it unsettled,
                // and the devices that are done are recorded so that a later push goes to the waiting ones alone.
                let done = (start..<end).filter { tally.done[$0] }
                let settles = done.count == end - start
                if settles, tally.accepted[index] != nil, let dueAt = jobs[index].delivery.dueAt {
                    lags.append(settledAt.timeIntervalSince(dueAt))
                }
                if settles, !resumed.contains(index) {
                    marks.append(
                        PushSettlement(
                            tenant: tenantID,
                            user: jobs[index].delivery.user,
                            delivery: jobs[index].delivery.id,
                            apnsID: tally.accepted[index],
                            channels: tally.channels[index]
                        )
                    )
                } else if settles || !done.isEmpty {
                    marks.append(
                        PushSettlement(
                            tenant: tenantID,
                            user: jobs[index].delivery.user,
                            delivery: jobs[index].delivery.id,
                            apnsID: tally.accepted[index],
                            channels: tally.channels[index],
                            progress: (settles ? [] : done.map { sends[$0].push.device.token.rawValue }, settles)
                        )
                    )
                    if !settles { counts.partlyPushed += 1 }
                }
                // A device whose channel kept failing is tried again by itself, its user's others not again.
                if !settles, tally.deferred.contains(index) {
                    var later = jobs[index].delivery
                    later.pushedDevices = (later.pushedDevices ?? known[later.id] ?? [])
                        .union(done.map { sends[$0].push.device.token.rawValue })
                    if later.pushedAt == nil, tally.accepted[index] != nil { later.pushedAt = settledAt }
                    retryLater.append(later)
                }
            }
            metrics.dispatchLag(tenant: tenantID, seconds: lags)
            await add(counts)
            // The marks already queued as their answers came keep their apns-id; only the shards learn of them here.
            let recorded = early.byDelivery
            if !recorded.isEmpty {
                for index in marks.indices {
                    if let apnsID = recorded[marks[index].delivery] { marks[index].apnsID = apnsID }
                }
            }
            try await ledger.record(marks, at: settledAt, written: Set(recorded.keys))
            if !retryLater.isEmpty { await deferLater(retryLater) }
        } catch is CancellationError {
            // Shutting down: the deliveries stay unsettled and are pushed at the next start.
        } catch {
            logger.error(
                "push batch failed; its deliveries stay unsettled and are pushed again later",
                metadata: ["tenant.id": "\(tenantID)", "deliveries": "\(jobs.count)", "error": "\(error)"]
            )
        }
    }
}
