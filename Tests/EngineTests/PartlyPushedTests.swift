import Foundation
import Logging
import Synchronization
import TestSupport
import Testing

@testable import Engine

/// A user with an iPhone and an Android phone whose one channel keeps failing while the other takes the push: the
/// delivery is settled only when each device has its outcome, the waiting device is pushed again by itself, and
/// the reports count the delivery once (issue 44: 39 of 179 Android phones missed their day because the iPhone's
/// acceptance settled the delivery).
@Suite("A delivery pushed device by device", .timeLimit(.minutes(3)))
struct PartlyPushedTests {
    static let iPhone = String(repeating: "ab", count: 32)
    static let android = "partly:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
    static let impulse = try! ImpulseID("one")

    /// Fails the failing channel's pushes until `recovered`, then accepts them; the other channel accepts at once.
    final class FlakyChannel: PushTransport {
        let failing: PushChannel
        let recovered = Mutex(false)
        let sent = Mutex<[OutboundPush]>([])

        init(failing: PushChannel) { self.failing = failing }

        func send(_ push: OutboundPush) async -> PushResult {
            sent.withLock { $0.append(push) }
            if push.device.channel == failing, !recovered.withLock({ $0 }) {
                return .transportFailure(description: "token endpoint answered 500", resendable: true)
            }
            return .accepted(apnsID: "\(push.device.channel.rawValue)-\(push.delivery.rawValue)")
        }

        func renewCredentials(tenant: TenantID) async {}

        func tokens() -> [String] { sent.withLock { $0.map(\.device.token.rawValue) } }
    }

    struct World {
        let f: StoreFixture
        let clock: ManualClock
        let transport: FlakyChannel
        let gateway: PushGateway
        let delivery: Delivery

        /// The delivery's row: (pushed, settled, pushed devices, channels).
        func row() async throws -> (pushed: Bool, settled: Bool, devices: String?, channels: String?) {
            let row = try #require(
                try await f.texts(
                    """
                    SELECT CAST(pushed_at AS TEXT), CAST(settled_at AS TEXT), pushed_devices,
                        CAST(pushed_channels AS TEXT)
                    FROM deliveries WHERE id = \(delivery.id.rawValue)
                    """
                ).first
            )
            return (row[0] != nil, row[1] != nil, row[2], row[3])
        }

        func counts() async throws -> EngagementCounts {
            let day = LocalDate(instant: delivery.assignedAt.timeIntervalSince1970, offsetSeconds: 0)
            let records = try await f.store.engagement(tenant: f.acme, from: day, through: day)
            return records.engagement[EngagementKey(tenant: f.acme, day: day.description, impulse: impulse)]
                ?? EngagementCounts()
        }
    }

    /// User `a` with both phones; one attempt per push (a failure defers at once), the gateway on a manual clock.
    static func world(_ kind: StoreKind, failing: PushChannel) async throws -> World {
        let f = try await StoreFixture.make(kind)
        _ = try await f.store.registerDevice(try f.device(f.a, token: iPhone))
        _ = try await f.store.registerDevice(try f.device(f.a, token: android, channel: .fcm))
        let clock = ManualClock()
        let transport = FlakyChannel(failing: failing)
        let gateway = PushGateway(
            store: f.store,
            ledger: DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store)),
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: transport,
            configuration: .init(policy: PushOutcomePolicy(maximumAttempts: 1)),
            logger: StoreFixture.logger,
            clock: clock
        )
        let delivery = try #require(
            try await f.store.recordDeliveries([
                NewDelivery(
                    tenant: f.acme,
                    user: f.a.id,
                    impulse: impulse,
                    kind: .manual,
                    assignedAt: Date(),
                    awaitsPush: true
                )
            ]).first
        )
        return World(f: f, clock: clock, transport: transport, gateway: gateway, delivery: delivery)
    }

    @Test(
        "One phone takes it, the other's channel fails: unsettled, counted pushed once; the waiting phone alone gets it after 10 s",
        arguments: StoreKind.allCases,
        [PushChannel.fcm, .apns]
    )
    func waitingDeviceRetriedAlone(_ kind: StoreKind, failing: PushChannel) async throws {
        let w = try await Self.world(kind, failing: failing)
        let running = Task { await w.gateway.run() }
        defer { running.cancel() }
        let (failingToken, workingToken) = failing == .fcm ? (Self.android, Self.iPhone) : (Self.iPhone, Self.android)
        await w.gateway.enqueue(w.delivery)

        // The working phone took it; the delivery waits for the other, which is recorded as not done.
        #expect(try await eventually { try await w.row().pushed })
        let partly = try await w.row()
        #expect(!partly.settled, "settled although the \(failing) phone never got its push")
        #expect(partly.devices == workingToken)
        var counts = try await w.counts()
        #expect(counts.pushed == 1 && counts.failed == 0)
        #expect(counts.channels[failing == .fcm ? .apns : .fcm]?.pushed == 1 && counts.channels[failing] == nil)
        #expect(await w.gateway.statistics.partlyPushed == 1)

        // Still failing at the first retry: only the waiting phone is tried, and the delivery waits on.
        #expect(try await eventually { w.clock.sleepers == 1 })
        w.clock.advance(by: .seconds(10))
        #expect(try await eventually { w.transport.tokens().count == 3 })
        #expect(w.transport.tokens().last == failingToken)
        #expect(try await eventually { w.clock.sleepers == 1 && w.clock.untilNextWake == .seconds(10) })
        #expect(try await w.row().settled == false)

        // The channel is back: the next retry (20 s after the second deferral) reaches the waiting phone alone.
        w.transport.recovered.withLock { $0 = true }
        let asked = w.clock.requested.count
        w.clock.advance(by: .seconds(10))
        #expect(try await eventually { w.clock.requested.count > asked && w.clock.sleepers == 1 })
        #expect(try await w.row().settled == false, "pushed again before its 20 s pause")
        w.clock.advance(by: .seconds(10))
        #expect(try await eventually { try await w.row().settled })
        let tokens = w.transport.tokens()
        #expect(tokens.filter { $0 == workingToken }.count == 1, "the working phone got the impulse twice: \(tokens)")
        #expect(tokens.filter { $0 == failingToken }.count == 3)
        let settled = try await w.row()
        #expect(settled.devices == nil && settled.channels == "3")
        counts = try await w.counts()
        #expect(counts.pushed == 1 && counts.failed == 0)
        #expect(counts.channels[.apns]?.pushed == 1 && counts.channels[.fcm]?.pushed == 1)
        #expect(w.clock.sleepers == 0)
    }

    @Test(
        "After a restart the sweep pushes a partly pushed delivery to its waiting phone only",
        arguments: StoreKind.allCases
    )
    func sweepPushesTheWaitingDeviceOnly(_ kind: StoreKind) async throws {
        let w = try await Self.world(kind, failing: .fcm)
        let first = Task { await w.gateway.run() }
        await w.gateway.enqueue(w.delivery)
        #expect(try await eventually { try await w.row().devices == Self.iPhone })
        // The process ends with the delivery partly pushed (its retry not yet due).
        await w.gateway.finish()
        await first.value
        // As a stopping node does: its leases end, so the next start (or another node) takes the delivery at once.
        _ = try await w.f.store.handBackWork()

        // The next start: a new gateway, the channel back, the scheduler's start-up sweep.
        let transport = FlakyChannel(failing: .fcm)
        transport.recovered.withLock { $0 = true }
        let ledger = DeliveryLedger(store: w.f.store, catalog: CatalogCache(store: w.f.store))
        let gateway = PushGateway(
            store: w.f.store,
            ledger: ledger,
            registry: TokenRegistry(store: w.f.store, logger: StoreFixture.logger),
            transport: transport,
            logger: StoreFixture.logger
        )
        let second = Task { await gateway.run() }
        defer { second.cancel() }
        let scheduler = Scheduler(store: w.f.store, ledger: ledger, gateway: gateway, logger: StoreFixture.logger)
        _ = try await scheduler.requeueUnsettled(now: Date())
        #expect(try await eventually { try await w.row().settled })
        #expect(transport.tokens() == [Self.android])
        let counts = try await w.counts()
        #expect(counts.pushed == 1 && counts.channels[.apns]?.pushed == 1 && counts.channels[.fcm]?.pushed == 1)
    }

    @Test(
        "A delivery unsettled past the staleness limit is given up by the sweep: settled, counted failed once",
        arguments: StoreKind.allCases
    )
    func staleDeliveriesGivenUp(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        _ = try await f.store.registerDevice(try f.device(f.a, token: Self.iPhone))
        let old = Date().addingTimeInterval(-13 * 3600)
        let recorded = try await f.store.recordDeliveries(
            [f.a, f.a].map {
                NewDelivery(
                    tenant: f.acme,
                    user: $0.id,
                    impulse: Self.impulse,
                    kind: .manual,
                    assignedAt: old,
                    awaitsPush: true
                )
            }
        )
        // One of them took its push on one device before (its other device's channel kept failing).
        try await f.store.applyMarks([
            DeliveryMark(
                tenant: f.acme,
                delivery: recorded[0].id,
                kind: .progress(apnsID: "a-1", channels: .apns, devices: [Self.iPhone], settles: false),
                at: old
            )
        ])
        let transport = FlakyChannel(failing: .fcm)
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        let gateway = PushGateway(
            store: f.store,
            ledger: ledger,
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: transport,
            logger: StoreFixture.logger
        )
        let scheduler = Scheduler(store: f.store, ledger: ledger, gateway: gateway, logger: StoreFixture.logger)
        let swept = try await scheduler.requeueUnsettled(now: Date())
        #expect(swept.queued == 0 && transport.tokens().isEmpty)
        let rows = try await f.texts(
            "SELECT CAST(id AS TEXT) FROM deliveries WHERE settled_at IS NULL ORDER BY id"
        )
        #expect(rows.isEmpty, "still unsettled: \(rows)")
        let day = LocalDate(instant: old.timeIntervalSince1970, offsetSeconds: 0)
        let counts = try await f.store.engagement(tenant: f.acme, from: day, through: day).engagement[
            EngagementKey(tenant: f.acme, day: day.description, impulse: Self.impulse)
        ]
        #expect(counts?.pushed == 1 && counts?.failed == 1)
        // Given up once: a second sweep finds nothing more.
        _ = try await scheduler.requeueUnsettled(now: Date())
        let again = try await f.store.engagement(tenant: f.acme, from: day, through: day).engagement[
            EngagementKey(tenant: f.acme, day: day.description, impulse: Self.impulse)
        ]
        #expect(again?.failed == 1)
    }
}
