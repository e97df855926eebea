import DequeModule
import Foundation
import Logging

/// Configuration of the push gateway.
public struct PushGatewayConfiguration: Sendable {
    /// Deliveries waiting per tenant; a producer suspends beyond it (backpressure, bounded memory).
    public var queueCapacityPerTenant: Int
    /// Pushes in flight at once across all tenants.
    public var workers: Int
    public var policy: PushOutcomePolicy

    public init(queueCapacityPerTenant: Int = 1000, workers: Int = 128, policy: PushOutcomePolicy = .init()) {
        self.queueCapacityPerTenant = max(1, queueCapacityPerTenant)
        self.workers = max(1, workers)
        self.policy = policy
    }
}

/// Counters of what the gateway did (closed label sets: outcome, APNs reason).
public struct PushStatistics: Sendable, Equatable {
    public var accepted = 0
    public var rejected: [String: Int] = [:]
    public var retried = 0
    public var transportFailures = 0
    public var tokensQuarantined = 0
    public var tokensRemoved = 0
    public var withoutDevice = 0
    /// Deliveries left unpushed after transient failures outlasted the retries (tried again by a later sweep).
    public var deferred = 0

    public init() {}
}

/// Takes deliveries, pushes them to every device of their user, and reports each outcome to the ledger and the
/// token registry.
///
/// Each tenant has a bounded queue: `enqueue` suspends while its tenant's queue is full, so a fast producer (the
/// scheduler's burst) is slowed to what APNs accepts and memory stays bounded. Workers take tenants in turn, so
/// one tenant's backlog does not starve another, and a tenant whose credentials APNs rejects is paused alone.
public actor PushGateway {
    private let store: any BrokerStore
    private let ledger: DeliveryLedger
    private let registry: TokenRegistry
    private let transport: any PushTransport
    private let configuration: PushGatewayConfiguration
    private let logger: Logger
    private let metrics: BrokerMetrics
    /// Tenants and impulses read once a minute, not once per push.
    private let catalog: CatalogCache

    /// A queued push: the delivery and, when the producer read it ahead, its devices and badge.
    struct Job {
        var delivery: Delivery
        var target: PushTarget?
    }

    private var queues: [TenantID: Deque<Job>] = [:]
    private var rotation: Deque<TenantID> = []
    private var blockedProducers: [TenantID: [(id: UInt64, continuation: CheckedContinuation<Void, Never>)]] = [:]
    private var nextWaiter: UInt64 = 0
    /// Deliveries queued or in flight: a second enqueue of one of them (a sweep, a restart) is ignored.
    private var pending: Set<DeliveryID> = []
    /// Deliveries a paused tenant put back into its queue while their push was running.
    private var requeued: Set<DeliveryID> = []
    private var idleWorkers: [CheckedContinuation<Void, Never>] = []
    private var paused: [TenantID: String] = [:]
    private var stopping = false
    private var inFlight = 0
    public private(set) var statistics = PushStatistics()

    public init(
        store: any BrokerStore,
        ledger: DeliveryLedger,
        registry: TokenRegistry,
        transport: any PushTransport,
        configuration: PushGatewayConfiguration = .init(),
        logger: Logger,
        metrics: BrokerMetrics = .disabled
    ) {
        self.store = store
        self.ledger = ledger
        self.registry = registry
        self.transport = transport
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.catalog = CatalogCache(store: store)
    }

    /// Queues a delivery's push, suspending while the tenant's queue is full. Returns false when it was not
    /// queued: already pending, the gateway is stopping, or the caller was cancelled while waiting (the delivery
    /// stays unpushed in the ledger and is pushed again later).
    @discardableResult
    public func enqueue(_ delivery: Delivery, target: PushTarget? = nil) async -> Bool {
        guard !pending.contains(delivery.id) else { return false }
        while (queues[delivery.tenant]?.count ?? 0) >= configuration.queueCapacityPerTenant, !stopping {
            if Task.isCancelled { return false }
            nextWaiter &+= 1
            let id = nextWaiter
            await withTaskCancellationHandler {
                await withCheckedContinuation { blockedProducers[delivery.tenant, default: []].append((id, $0)) }
            } onCancel: {
                Task { await self.release(waiter: id, tenant: delivery.tenant) }
            }
        }
        guard !stopping, !Task.isCancelled, !pending.contains(delivery.id) else { return false }
        if queues[delivery.tenant] == nil { rotation.append(delivery.tenant) }
        queues[delivery.tenant, default: []].append(Job(delivery: delivery, target: target))
        pending.insert(delivery.id)
        wakeWorker()
        return true
    }

    private func release(waiter: UInt64, tenant: TenantID) {
        guard let index = blockedProducers[tenant]?.firstIndex(where: { $0.id == waiter }) else { return }
        blockedProducers[tenant]?.remove(at: index).continuation.resume()
    }

    /// Runs the workers until the task is cancelled; queued deliveries stay unpushed in the ledger (and are
    /// pushed again after a restart), never lost.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<configuration.workers {
                group.addTask { await self.work() }
            }
            await withTaskCancellationHandler {
                await group.waitForAll()
            } onCancel: {
                Task { await self.stop() }
            }
        }
    }

    /// Clears a tenant's configuration error so its queue moves again.
    public func resume(tenant: TenantID) {
        paused[tenant] = nil
        wakeWorker()
    }

    /// Queue depth, in-flight pushes and the configuration error per tenant (for inspection).
    public func snapshot() -> (queued: [TenantID: Int], inFlight: Int, paused: [TenantID: String]) {
        (queues.mapValues(\.count), inFlight, paused)
    }

    private func stop() {
        stopping = true
        for waiter in idleWorkers { waiter.resume() }
        idleWorkers.removeAll()
        for waiters in blockedProducers.values { for waiter in waiters { waiter.continuation.resume() } }
        blockedProducers.removeAll()
    }

    private func wakeWorker() {
        if !idleWorkers.isEmpty { idleWorkers.removeFirst().resume() }
    }

    /// The next delivery, taking tenants in turn and skipping paused ones; nil when stopping.
    private func next() async -> Job? {
        while !stopping {
            for _ in 0..<rotation.count {
                guard let tenant = rotation.popFirst() else { break }
                guard let depth = queues[tenant]?.count, depth > 0 else {
                    queues[tenant] = nil
                    continue
                }
                rotation.append(tenant)
                if paused[tenant] != nil { continue }
                // Popped in place: copying the queue out and back would copy every waiting delivery.
                guard let job = queues[tenant]?.popFirst() else { continue }
                if let producer = blockedProducers[tenant]?.popLast() { producer.continuation.resume() }
                inFlight += 1
                return job
            }
            await withCheckedContinuation { idleWorkers.append($0) }
        }
        return nil
    }

    private func work() async {
        while let job = await next() {
            await push(job.delivery, target: job.target)
            finished(job.delivery)
        }
    }

    private func finished(_ delivery: Delivery) {
        inFlight -= 1
        // A delivery requeued by a paused tenant is back in its queue: still pending.
        if requeued.remove(delivery.id) == nil { pending.remove(delivery.id) }
    }

    private func pause(_ tenant: TenantID, reason: String, requeue delivery: Delivery) {
        if paused[tenant] == nil {
            logger.error(
                "APNs rejected the tenant's credentials; its pushes are paused",
                metadata: ["tenant.id": "\(tenant)", "apns.reason": "\(reason)"]
            )
        }
        paused[tenant] = reason
        if queues[tenant] == nil { rotation.append(tenant) }
        // Devices are read again when it is retried: they may change while the tenant is paused.
        queues[tenant, default: []].prepend(Job(delivery: delivery, target: nil))
        requeued.insert(delivery.id)
    }

    private func count(_ update: (inout PushStatistics) -> Void) {
        update(&statistics)
    }

    /// Pushes one delivery to each of its user's devices and executes what each outcome calls for.
    private nonisolated func push(_ delivery: Delivery, target: PushTarget?) async {
        let tenantID = delivery.tenant
        do {
            guard let tenant = try await catalog.tenant(tenantID),
                let impulse = try await catalog.impulse(tenant: tenantID, id: delivery.impulse)
            else { return }
            var all = target?.devices
            if all == nil { all = try await registry.devices(tenant: tenant, user: delivery.user) }
            let devices = (all ?? []).filter { $0.quarantinedAt == nil }
            guard !devices.isEmpty else {
                await count { $0.withoutDevice += 1 }
                try await ledger.markSettled(tenant: tenantID, user: delivery.user, delivery: delivery.id)
                return
            }
            let badge: Int
            if let target {
                badge = target.unreadCount
            } else {
                badge = try await ledger.badge(tenant: tenantID, user: delivery.user)
            }
            var acceptedID: String?
            var requeued = false
            var deferred = false
            devices: for device in devices {
                let push = OutboundPush(
                    tenant: tenantID,
                    delivery: delivery.id,
                    device: device,
                    title: impulse.title,
                    badge: badge,
                    impulse: impulse.id
                )
                switch try await send(push, tenant: tenant, delivery: delivery) {
                case .accepted(let id): acceptedID = acceptedID ?? id
                case .finished: continue
                case .deferred: deferred = true
                // The delivery went back to the paused tenant's queue once; its other devices wait with it.
                case .tenantStopped:
                    requeued = true
                    break devices
                }
            }
            if let acceptedID {
                if let dueAt = delivery.dueAt {
                    metrics.dispatchLag(tenant: tenantID, seconds: Date().timeIntervalSince(dueAt))
                }
                try await ledger.markPushed(
                    tenant: tenantID,
                    user: delivery.user,
                    delivery: delivery.id,
                    apnsID: acceptedID
                )
            } else if !requeued && !deferred {
                try await ledger.markSettled(tenant: tenantID, user: delivery.user, delivery: delivery.id)
            }
        } catch is CancellationError {
            // Shutting down: the delivery stays unsettled and is pushed at the next start.
        } catch {
            logger.error(
                "push failed",
                metadata: ["tenant.id": "\(tenantID)", "delivery.id": "\(delivery.id)", "error": "\(error)"]
            )
        }
    }

    /// How one device's push ended.
    private enum DeviceOutcome {
        case accepted(apnsID: String)
        case finished
        /// Transient failures outlasted the retries: the delivery stays unsettled for a later attempt.
        case deferred
        case tenantStopped
    }

    /// Sends to one device until the policy says stop.
    private nonisolated func send(
        _ push: OutboundPush,
        tenant: Tenant,
        delivery: Delivery
    ) async throws -> DeviceOutcome {
        var attempt = 0
        while true {
            attempt += 1
            let started = ContinuousClock.now
            let result = await transport.send(push)
            metrics.push(tenant: tenant.id, result: result, duration: started.duration(to: .now))
            let action = configuration.policy.action(for: result, attempt: attempt, jitter: Double.random(in: 0...1))
            var metadata: Logger.Metadata = [
                "tenant.id": "\(tenant.id)", "delivery.id": "\(push.delivery)", "device.token": "\(push.device.token)",
            ]
            if case .rejected(let status, let reason, _) = result {
                metadata["apns.reason"] = "\(reason)"
                await count { $0.rejected["\(status) \(reason)", default: 0] += 1 }
            }
            if case .transportFailure = result { await count { $0.transportFailures += 1 } }
            switch action {
            case .delivered:
                await count { $0.accepted += 1 }
                if case .accepted(let apnsID) = result { return .accepted(apnsID: apnsID) }
                return .finished
            case .retry(let backoff, _):
                await count { $0.retried += 1 }
                try await Task.sleep(for: backoff)
            case .renewProviderTokenAndRetry:
                await transport.renewCredentials(tenant: tenant.id)
            case .drop(let alert):
                if alert { logger.warning("push dropped", metadata: metadata) }
                return .finished
            case .deferred:
                await count { $0.deferred += 1 }
                logger.warning("push deferred: APNs kept failing; it is tried again later", metadata: metadata)
                return .deferred
            case .quarantineToken:
                try await registry.quarantine(tenant: tenant, token: push.device.token)
                await count { $0.tokensQuarantined += 1 }
                return .finished
            case .removeTokenForTopic:
                try await registry.remove(tenant: tenant, token: push.device.token)
                await count { $0.tokensRemoved += 1 }
                return .finished
            case .removeTokenIfRegisteredBefore(let since):
                if try await registry.invalidate(tenant: tenant, token: push.device.token, since: since) {
                    await count { $0.tokensRemoved += 1 }
                }
                return .finished
            case .stopTenant(let reason):
                await pause(tenant.id, reason: reason, requeue: delivery)
                return .tenantStopped
            }
        }
    }
}
