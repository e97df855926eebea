import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import Engine

/// A scripted push transport: answers by token, records what it was asked, optionally slowly.
final class ScriptedTransport: PushTransport {
    let answers: [String: PushResult]
    let delay: Duration
    let sent = Mutex<[OutboundPush]>([])
    let renewals = Mutex(0)
    let concurrent = Mutex((now: 0, peak: 0))

    init(answers: [String: PushResult] = [:], delay: Duration = .zero) {
        self.answers = answers
        self.delay = delay
    }

    func send(_ push: OutboundPush) async -> PushResult {
        concurrent.withLock {
            $0.now += 1
            $0.peak = max($0.peak, $0.now)
        }
        if delay > .zero { try? await Task.sleep(for: delay) }
        concurrent.withLock { $0.now -= 1 }
        sent.withLock { $0.append(push) }
        return answers[push.device.token.rawValue] ?? .accepted(apnsID: "id-\(push.delivery.rawValue)")
    }

    func renewCredentials(tenant: TenantID) async {
        renewals.withLock { $0 += 1 }
    }
}

/// A transport that answers each token's pushes from its own script in turn (accepted once a script runs out).
final class SequencedTransport: PushTransport {
    let scripts: Mutex<[String: [PushResult]]>
    let sent = Mutex<[OutboundPush]>([])
    /// The size of each batch the gateway sent.
    let batches = Mutex<[Int]>([])

    init(_ scripts: [String: [PushResult]]) { self.scripts = Mutex(scripts) }

    func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        batches.withLock { $0.append(pushes.count) }
        var answers: [PushAnswer] = []
        for (index, push) in pushes.enumerated() {
            let result = await send(push)
            if case .accepted(let id) = result { onAnswer(index, id) } else { onAnswer(index, nil) }
            answers.append(PushAnswer(result: result, latency: .zero))
        }
        return answers
    }

    func send(_ push: OutboundPush) async -> PushResult {
        sent.withLock { $0.append(push) }
        let scripted = scripts.withLock { scripts -> PushResult? in
            guard var script = scripts[push.device.token.rawValue], !script.isEmpty else { return nil }
            let first = script.removeFirst()
            scripts[push.device.token.rawValue] = script
            return first
        }
        return scripted ?? .accepted(apnsID: "id-\(push.delivery.rawValue)")
    }

    func renewCredentials(tenant: TenantID) async {}
}

/// A transport whose pushes to some tokens wait until the test opens the gate; the rest answer at once.
final class GatedTransport: PushTransport {
    let gated: Set<String>
    let sent = Mutex<[OutboundPush]>([])
    let awaiting = Mutex((now: 0, peak: 0))
    private let gate = Mutex((open: false, waiting: [CheckedContinuation<Void, Never>]()))

    init(gated: Set<String>) { self.gated = gated }

    func send(_ push: OutboundPush) async -> PushResult {
        awaiting.withLock {
            $0.now += 1
            $0.peak = max($0.peak, $0.now)
        }
        if gated.contains(push.device.token.rawValue) {
            await withCheckedContinuation { continuation in
                let open = gate.withLock { gate in
                    if !gate.open { gate.waiting.append(continuation) }
                    return gate.open
                }
                if open { continuation.resume() }
            }
        }
        sent.withLock { $0.append(push) }
        awaiting.withLock { $0.now -= 1 }
        return .accepted(apnsID: "id-\(push.delivery.rawValue)")
    }

    func open() {
        let waiting = gate.withLock { gate in
            gate.open = true
            defer { gate.waiting.removeAll() }
            return gate.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    func renewCredentials(tenant: TenantID) async {}
}

@Suite("Push gateway", .timeLimit(.minutes(3)))
struct PushGatewayTests {
    func token(_ n: Int) throws -> DeviceToken { try DeviceToken(String(format: "%064x", n)) }

    func register(_ f: StoreFixture, _ user: User, _ n: Int, at seconds: Double = 1000) async throws {
        _ = try await f.store.registerDevice(try f.device(user, token: String(format: "%064x", n), at: seconds))
    }

    /// A gateway on the fixture's store, with its own ledger and registry.
    func makeGateway(
        _ f: StoreFixture,
        _ transport: some PushTransport,
        _ configuration: PushGatewayConfiguration = .init(),
        clock: any EngineClock = SystemClock()
    ) -> PushGateway {
        PushGateway(
            store: f.store,
            ledger: DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store)),
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: transport,
            configuration: configuration,
            logger: StoreFixture.logger,
            clock: clock
        )
    }

    func deliver(_ f: StoreFixture, _ user: User) async throws -> Delivery {
        try #require(
            try await f.store.recordDeliveries([
                NewDelivery(
                    tenant: user.tenant,
                    user: user.id,
                    impulse: try ImpulseID("one"),
                    kind: .manual,
                    assignedAt: Date()
                )
            ]).first
        )
    }

    @Test(
        "Outcomes reach the ledger and the registry: pushed-at, quarantine, and 410 only for older tokens",
        arguments: StoreKind.allCases
    )
    func outcomes(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)  // accepted
        try await register(f, f.a, 2, at: 1000)  // 410 since 2000: registered before, removed
        try await register(f, f.b, 3, at: 3000)  // 410 since 2000: registered after, kept
        try await register(f, f.b, 4)  // BadDeviceToken: quarantined
        let transport = ScriptedTransport(answers: [
            String(format: "%064x", 2): .rejected(
                status: 410,
                reason: "Unregistered",
                timestamp: Date(timeIntervalSince1970: 2000)
            ),
            String(format: "%064x", 3): .rejected(
                status: 410,
                reason: "Unregistered",
                timestamp: Date(timeIntervalSince1970: 2000)
            ),
            String(format: "%064x", 4): .rejected(status: 400, reason: "BadDeviceToken", timestamp: nil),
        ])
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        let gateway = PushGateway(
            store: f.store,
            ledger: ledger,
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: transport,
            logger: StoreFixture.logger
        )
        let running = Task { await gateway.run() }
        let forA = try await deliver(f, f.a)
        let forB = try await deliver(f, f.b)
        await gateway.enqueue(forA)
        await gateway.enqueue(forB)
        #expect(
            try await eventually { await gateway.statistics.accepted == 1 && transport.sent.withLock { $0.count } == 4 }
        )
        // The ledger mark follows the last device's answer; wait for it rather than for the counter.
        #expect(
            try await eventually {
                let a = try await f.store.deliveredImpulse(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"))
                return a?.delivery.pushedAt != nil && a?.delivery.apnsID == "id-\(forA.id.rawValue)"
            }
        )
        let b = try await f.store.deliveredImpulse(tenant: f.acme, user: f.b.id, impulse: try ImpulseID("one"))
        #expect(b?.delivery.pushedAt == nil)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.a.id).map(\.token) == [try token(1)])
        let bDevices = try await f.store.devices(tenant: f.acme, owner: f.b.id)
        #expect(Set(bDevices.map(\.token)) == [try token(3), try token(4)])
        #expect(bDevices.first { $0.token == (try? token(4)) }?.quarantinedAt != nil)
        // The badge is the true unread count, not 1.
        #expect(transport.sent.withLock { $0.first { $0.device.owner == f.a.id }?.badge } == 1)
        // A quarantined token gets nothing until it is registered again.
        await gateway.enqueue(try await deliver(f, f.b))
        #expect(try await eventually { transport.sent.withLock { $0.count } == 5 })
        #expect(transport.sent.withLock { $0.last?.device.token } == (try token(3)))
        running.cancel()
    }

    @Test(
        "A full tenant queue suspends the producer; in-flight pushes stay within the worker count",
        arguments: StoreKind.allCases
    )
    func backpressure(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        let transport = ScriptedTransport(delay: .milliseconds(20))
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 3, workers: 2))
        let running = Task { await gateway.run() }
        var deliveries: [Delivery] = []
        for _ in 0..<12 { deliveries.append(try await deliver(f, f.a)) }
        let peakQueue = Mutex(0)
        let producer = Task {
            for delivery in deliveries {
                await gateway.enqueue(delivery)
                let queued = await gateway.snapshot().queued[f.acme] ?? 0
                peakQueue.withLock { $0 = max($0, queued) }
            }
        }
        await producer.value
        #expect(try await eventually { transport.sent.withLock { $0.count } == 12 })
        #expect(peakQueue.withLock { $0 } <= 3)
        #expect(transport.concurrent.withLock { $0.peak } <= 2)
        running.cancel()
    }

    @Test("Shedding drops the queue, frees a producer waiting for room, takes nothing until resumed")
    func shedding() async throws {
        let f = try await StoreFixture.make(.sqlite)
        try await register(f, f.a, 1)
        // Not running: nothing leaves the queue, so the third delivery's producer waits for room.
        let gateway = makeGateway(f, ScriptedTransport(), .init(queueCapacityPerTenant: 2, workers: 1))
        var deliveries: [Delivery] = []
        for _ in 0..<4 { deliveries.append(try await deliver(f, f.a)) }
        #expect(await gateway.enqueue(contentsOf: deliveries.prefix(2).map { ($0, nil) }) == 2)
        let third = deliveries[2]
        let waiting = Task { await gateway.enqueue(third) }
        #expect(try await eventually { await gateway.snapshot().queued[f.acme] == 2 })
        #expect(await gateway.shed() == 2)
        #expect(await waiting.value == false)
        #expect(await gateway.snapshot().queued[f.acme] == 0)
        #expect(await gateway.enqueue(deliveries[3]) == false)
        await gateway.resumeTaking()
        // The dropped ones are not pending any more: a later sweep queues them again.
        #expect(await gateway.enqueue(contentsOf: deliveries.prefix(2).map { ($0, nil) }) == 2)
    }

    @Test(
        "Deliveries enqueued together: duplicates ignored, each tenant's in its own queue, each pushed once",
        arguments: StoreKind.allCases
    )
    func enqueueContentsOf(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        try await register(f, f.globexA, 2)
        let transport = ScriptedTransport()
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 100, workers: 4, batchSize: 3))
        var acme: [Delivery] = []
        var globex: [Delivery] = []
        for _ in 0..<10 { acme.append(try await deliver(f, f.a)) }
        for _ in 0..<6 { globex.append(try await deliver(f, f.globexA)) }
        // Runs of both tenants, interleaved, with deliveries given twice within one call and again in a second.
        let items = Array(acme.prefix(5) + globex.prefix(3) + acme + globex.suffix(3) + acme.prefix(2))
        #expect(await gateway.enqueue(contentsOf: items.map { ($0, nil) }) == 16)
        #expect(await gateway.enqueue(contentsOf: globex.map { ($0, nil) }) == 0)
        let queued = await gateway.snapshot().queued
        #expect(queued[f.acme] == 10 && queued[f.globex] == 6)

        let running = Task { await gateway.run() }
        #expect(try await eventually { transport.sent.withLock { $0.count } == 16 })
        #expect(try await eventually { await gateway.snapshot().queued.values.allSatisfy { $0 == 0 } })
        let sent = transport.sent.withLock { $0 }
        #expect(sent.count == 16)
        #expect(Set(sent.map(\.delivery)) == Set((acme + globex).map(\.id)))
        let tenants = Dictionary(uniqueKeysWithValues: (acme + globex).map { ($0.id, $0.tenant) })
        #expect(sent.allSatisfy { tenants[$0.delivery] == $0.tenant && $0.device.tenant == $0.tenant })
        running.cancel()
    }

    @Test(
        "Deliveries enqueued together wait for room in a full tenant queue, and all go out",
        arguments: StoreKind.allCases
    )
    func enqueueContentsOfWaitsForRoom(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        let transport = ScriptedTransport(delay: .milliseconds(10))
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 3, workers: 2, batchSize: 1))
        var deliveries: [Delivery] = []
        for _ in 0..<12 { deliveries.append(try await deliver(f, f.a)) }
        let running = Task { await gateway.run() }
        let watching = Task {
            var peak = 0
            while !Task.isCancelled {
                peak = max(peak, await gateway.snapshot().queued[f.acme] ?? 0)
                try? await Task.sleep(for: .milliseconds(1))
            }
            return peak
        }
        #expect(await gateway.enqueue(contentsOf: deliveries.map { ($0, nil) }) == 12)
        #expect(try await eventually { transport.sent.withLock { $0.count } == 12 })
        watching.cancel()
        #expect(await watching.value <= 3)
        #expect(Set(transport.sent.withLock { $0.map(\.delivery) }) == Set(deliveries.map(\.id)))
        running.cancel()
    }

    @Test(
        "An answered push gives its place back at once: slow answers hold their own places, not their batches'",
        arguments: StoreKind.allCases
    )
    func slowAnswersHoldOnlyTheirPlaces(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let slow = [
            f.a, try await f.store.createUser(try NewUser(tenant: f.acme, username: "slow", passwordHash: "x")),
        ]
        try await register(f, slow[0], 1)
        try await register(f, slow[1], 2)
        try await register(f, f.b, 3)
        let transport = GatedTransport(gated: [String(format: "%064x", 1), String(format: "%064x", 2)])
        // Four places in batches of two. Each slow push shares its batch with a fast one; were places given back
        // per batch, both batches would hold all four places until the gate opens, and nothing else would go.
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 100, workers: 4, batchSize: 2))
        var deliveries = [try await deliver(f, slow[0]), try await deliver(f, f.b)]
        deliveries += [try await deliver(f, slow[1]), try await deliver(f, f.b)]
        for _ in 0..<10 { deliveries.append(try await deliver(f, f.b)) }
        for delivery in deliveries { await gateway.enqueue(delivery) }
        let running = Task { await gateway.run() }
        let fast = try token(3)
        #expect(try await eventually { transport.sent.withLock { $0.count { $0.device.token == fast } } == 12 })
        #expect(transport.sent.withLock { $0.count } == 12)
        #expect(await gateway.snapshot().inFlight == 2)
        #expect(transport.awaiting.withLock { $0.peak } <= 4)
        transport.open()
        #expect(try await eventually { transport.sent.withLock { $0.count } == 14 })
        #expect(try await eventually { await gateway.snapshot().inFlight == 0 })
        #expect(try await eventually { await gateway.statistics.accepted == 14 })
        running.cancel()
    }

    @Test(
        "An accepted push is marked pushed in the store as its answer comes, not when its batch is done",
        arguments: StoreKind.allCases
    )
    func pushedMarkPerAnswer(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        try await register(f, f.b, 2)
        // b's push hangs; a's shares its batch and is answered at once.
        let transport = GatedTransport(gated: [String(format: "%064x", 2)])
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 10, workers: 4, batchSize: 2))
        let first = try await deliver(f, f.a)
        let second = try await deliver(f, f.b)
        _ = await gateway.enqueue(contentsOf: [(first, nil), (second, nil)])
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        func pushedAt(_ delivery: Delivery, _ user: User) async throws -> Date? {
            try await f.store.deliveredImpulses(tenant: f.acme, user: user.id, after: nil, before: nil, limit: 10)
                .first { $0.delivery.id == delivery.id }?.delivery.pushedAt
        }
        // Durable while the batch still waits for b (before, both marks waited for the batch's last answer).
        #expect(try await eventually { try await pushedAt(first, f.a) != nil })
        #expect(try await pushedAt(second, f.b) == nil)
        transport.open()
        #expect(try await eventually { try await pushedAt(second, f.b) != nil })
        #expect(try await eventually { await gateway.statistics.accepted == 2 })
        let apnsIDs = try await f.store.deliveredImpulses(
            tenant: f.acme,
            user: f.a.id,
            after: nil,
            before: nil,
            limit: 10
        )
        .first { $0.delivery.id == first.id }?.delivery.apnsID
        #expect(apnsIDs == "id-\(first.id.rawValue)")
    }

    @Test(
        "Dead tokens cost one answer each: no retries, no pause, every valid push goes out",
        arguments: StoreKind.allCases
    )
    func deadTokensDoNotStall(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        var answers: [String: PushResult] = [:]
        var deliveries: [Delivery] = []
        for index in 0..<30 {
            let user = try await f.store.createUser(
                try NewUser(tenant: f.acme, username: "u\(index)", passwordHash: "x")
            )
            try await register(f, user, 100 + index)
            if index % 10 < 3 {
                answers[String(format: "%064x", 100 + index)] =
                    index % 2 == 0
                    ? .rejected(status: 400, reason: "BadDeviceToken", timestamp: nil)
                    : .rejected(status: 410, reason: "Unregistered", timestamp: Date())
            }
            deliveries.append(try await deliver(f, user))
        }
        let transport = ScriptedTransport(answers: answers, delay: .milliseconds(1))
        let gateway = makeGateway(f, transport, .init(queueCapacityPerTenant: 5, workers: 4))
        let running = Task { await gateway.run() }
        for delivery in deliveries { await gateway.enqueue(delivery) }
        #expect(try await eventually { transport.sent.withLock { $0.count } == 30 })
        #expect(
            try await eventually {
                let statistics = await gateway.statistics
                return statistics.accepted == 21 && statistics.tokensQuarantined + statistics.tokensRemoved == 9
            }
        )
        #expect(await gateway.statistics.retried == 0)
        #expect(await gateway.snapshot().paused.isEmpty)
        #expect(Set(transport.sent.withLock { $0.map(\.device.token) }).count == 30)
        running.cancel()
    }

    @Test(
        "Retries wait on the gateway's clock: FCM's quota answer holds the push for its Retry-After, an APNs 500 for its backoff, and neither goes out sooner",
        arguments: StoreKind.allCases
    )
    func retriesOnTheClock(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        let android = String(repeating: "k", count: 40)
        _ = try await f.store.registerDevice(try f.device(f.b, token: android, channel: .fcm))
        let quota = PushResult.refused(
            channel: .fcm,
            status: 429,
            reason: "QUOTA_EXCEEDED",
            outcome: .fcm(status: 429, errorCode: "QUOTA_EXCEEDED", retryAfter: .seconds(30), answeredAt: Date())
        )
        let transport = SequencedTransport([
            String(format: "%064x", 1): [.rejected(status: 500, reason: "InternalServerError", timestamp: nil)],
            android: [quota],
        ])
        let clock = ManualClock()
        let gateway = makeGateway(f, transport, clock: clock)
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        let deliveries = [try await deliver(f, f.a), try await deliver(f, f.b)]
        _ = await gateway.enqueue(contentsOf: deliveries.map { ($0, nil) })
        // Both first answers are in; the batch's resend loop waits on the clock (none on the system's) for the
        // earlier of the two, the APNs backoff.
        #expect(try await eventually { clock.sleepers == 1 })
        #expect(transport.sent.withLock { $0.count } == 2)
        let policy = PushGatewayConfiguration().policy
        let first = try #require(clock.requested.last)
        #expect(first <= policy.backoff(attempt: 1, jitter: 1))
        // Past the APNs backoff only: the iPhone's push goes again and is accepted; the Android one still waits,
        // for the rest of its Retry-After.
        clock.advance(by: first)
        #expect(try await eventually { transport.sent.withLock { $0.count } == 3 })
        #expect(transport.sent.withLock { $0.last?.device.channel } == .apns)
        #expect(try await eventually { clock.sleepers == 1 && clock.requested.count == 2 })
        let rest = try #require(clock.requested.last)
        #expect((first + rest).seconds >= 29.999)
        // Past Retry-After: the Android push goes and both deliveries are marked pushed.
        clock.advance(by: rest)
        #expect(try await eventually { transport.sent.withLock { $0.count } == 4 })
        #expect(
            try await eventually {
                let pushed = try await f.texts("SELECT id FROM deliveries WHERE pushed_at IS NOT NULL")
                return pushed.count == 2
            }
        )
        #expect(clock.sleepers == 0)
    }

    @Test(
        "One resend loop: a batch's resends that fall due together go out as one batch, each on its next attempt",
        arguments: StoreKind.allCases
    )
    func resendsGoOutTogether(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        for n in 1...3 { try await register(f, f.a, n) }
        let failure = PushResult.rejected(status: 500, reason: "InternalServerError", timestamp: nil)
        // Two failures each: the second resend is the third attempt, with a longer backoff.
        let transport = SequencedTransport(
            Dictionary(uniqueKeysWithValues: (1...3).map { (String(format: "%064x", $0), [failure, failure]) })
        )
        let clock = ManualClock()
        let gateway = makeGateway(f, transport, clock: clock)
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        _ = await gateway.enqueue(try await deliver(f, f.a))
        for round in 1...2 {
            #expect(try await eventually { clock.sleepers == 1 && clock.requested.count == round })
            // The latest of the three resends' backoffs, so that all are due when the clock gets there.
            clock.advance(by: PushGatewayConfiguration().policy.backoff(attempt: round, jitter: 1))
            #expect(try await eventually { transport.batches.withLock { $0.count } == round + 1 })
        }
        #expect(
            try await eventually {
                try await f.texts("SELECT id FROM deliveries WHERE pushed_at IS NOT NULL").count == 1
            }
        )
        // The first send, then each round's three resends together, not three sends of one each.
        #expect(transport.batches.withLock { $0 } == [3, 3, 3])
        #expect(await gateway.statistics.retried == 6)
        #expect(await gateway.statistics.accepted == 3)
        #expect(clock.sleepers == 0)
    }

    @Test(
        "A graceful stop ends a resend's wait at once: the delivery stays unpushed for the next start, no resend goes out",
        arguments: StoreKind.allCases
    )
    func stopEndsResendWait(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        let transport = SequencedTransport([
            String(format: "%064x", 1): [.rejected(status: 503, reason: "ServiceUnavailable", timestamp: nil)]
        ])
        let clock = ManualClock()
        let gateway = makeGateway(f, transport, clock: clock)
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        _ = await gateway.enqueue(try await deliver(f, f.a))
        #expect(try await eventually { clock.sleepers == 1 })
        await gateway.finish()
        // The clock never moves: run returns because the stop ended the wait, not because the backoff passed.
        await running.value
        #expect(transport.sent.withLock { $0.count } == 1)
        #expect(try await f.texts("SELECT id FROM deliveries WHERE pushed_at IS NOT NULL").isEmpty)
        #expect(clock.sleepers == 0)
    }

    @Test("A tenant configuration error pauses that tenant only", arguments: StoreKind.allCases)
    func tenantPause(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await register(f, f.a, 1)
        try await register(f, f.globexA, 9)
        try await register(f, f.globexA, 10)  // a second device must not queue the delivery twice
        let transport = ScriptedTransport(answers: [
            String(format: "%064x", 9): .rejected(status: 403, reason: "InvalidProviderToken", timestamp: nil),
            String(format: "%064x", 10): .rejected(status: 403, reason: "InvalidProviderToken", timestamp: nil),
        ])
        let gateway = makeGateway(f, transport)
        let running = Task { await gateway.run() }
        await gateway.enqueue(try await deliver(f, f.globexA))
        #expect(try await eventually { await gateway.snapshot().paused[f.globex] == "InvalidProviderToken" })
        await gateway.enqueue(try await deliver(f, f.a))
        #expect(try await eventually { await gateway.statistics.accepted == 1 })
        #expect(await gateway.snapshot().queued[f.globex] == 1)  // kept, not dropped
        running.cancel()
    }
}
