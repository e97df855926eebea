import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Engine

@Suite("Channel router", .timeLimit(.minutes(2)))
struct ChannelRouterTests {
    static let fcmToken = "fcm-registration:" + String(repeating: "Ab9_", count: 10)

    func push(_ f: StoreFixture, _ n: Int, channel: PushChannel) throws -> OutboundPush {
        let token = channel == .apns ? String(format: "%064x", n) : "\(Self.fcmToken)\(n)"
        return OutboundPush(
            tenant: f.acme,
            delivery: DeliveryID(Int64(n)),
            device: try f.device(f.a, token: token, channel: channel),
            title: "t",
            badge: 1,
            impulse: try ImpulseID("one")
        )
    }

    @Test("A mixed batch goes to each channel's transport; answers and onAnswer keep the batch's indexes")
    func splitsMixedBatch() async throws {
        let f = try await StoreFixture.make(.sqlite)
        let apns = ScriptedTransport()
        let fcm = ScriptedTransport(answers: [
            "\(Self.fcmToken)2": .refused(
                channel: .fcm,
                status: 404,
                reason: "UNREGISTERED",
                outcome: .deviceGone(evidence: Date(timeIntervalSince1970: 5))
            )
        ])
        let router = ChannelRouter([.apns: apns, .fcm: fcm])
        let channels: [PushChannel] = [.apns, .fcm, .fcm, .apns, .fcm]
        let pushes = try channels.enumerated().map { try push(f, $0.offset, channel: $0.element) }
        let heard = Mutex<[Int: String?]>([:])
        let answers = await router.send(batch: pushes) { index, id in heard.withLock { $0[index] = id } }
        #expect(answers.count == 5)
        #expect(apns.sent.withLock { $0.map(\.delivery) } == [DeliveryID(0), DeliveryID(3)])
        #expect(Set(fcm.sent.withLock { $0.map(\.delivery) }) == [DeliveryID(1), DeliveryID(2), DeliveryID(4)])
        for (index, answer) in answers.enumerated() where index != 2 {
            #expect(answer.result == .accepted(apnsID: "id-\(index)"))
            #expect(heard.withLock { $0[index] } == .some("id-\(index)"))
        }
        #expect(PushOutcome(answers[2].result) == .deviceGone(evidence: Date(timeIntervalSince1970: 5)))
        #expect(heard.withLock { $0[2] } == .some(nil))
        // A single push, and renewals, reach the channel's transport.
        #expect(await router.send(try push(f, 7, channel: .fcm)) == .accepted(apnsID: "id-7"))
        await router.renewCredentials(tenant: f.acme)
        #expect(apns.renewals.withLock { $0 } == 1 && fcm.renewals.withLock { $0 } == 1)
        // An expiry one channel answered renews that channel's credential alone.
        await router.renewCredentials(tenant: f.acme, channel: .fcm)
        #expect(apns.renewals.withLock { $0 } == 1 && fcm.renewals.withLock { $0 } == 2)
    }

    @Test("A channel without a transport is refused per push, without an alert and without judging the node")
    func unconfiguredChannel() async throws {
        let f = try await StoreFixture.make(.sqlite)
        let apns = ScriptedTransport()
        let router = ChannelRouter([.apns: apns])
        let pushes = [try push(f, 1, channel: .fcm), try push(f, 2, channel: .apns), try push(f, 3, channel: .fcm)]
        let heard = Mutex<[Int]>([])
        let answers = await router.send(batch: pushes) { index, _ in heard.withLock { $0.append(index) } }
        #expect(heard.withLock { $0.sorted() } == [0, 1, 2])
        #expect(answers[1].result == .accepted(apnsID: "id-2"))
        for index in [0, 2] {
            #expect(answers[index].result.refusal?.reason == ChannelRouter.notConfigured)
            #expect(PushOutcomePolicy().action(for: answers[index].result, attempt: 1) == .drop(alert: false))
            #expect(PushHealth.failing(answers[index].result) == nil)
        }
        #expect(apns.sent.withLock { $0.count } == 1)
    }

    /// The push gateway suite's helpers: a delivery of impulse `one`, and a gateway on the fixture's store.
    func deliver(_ f: StoreFixture, _ user: User) async throws -> Delivery {
        try await PushGatewayTests().deliver(f, user)
    }

    func gateway(_ f: StoreFixture, _ transport: some PushTransport) -> PushGateway {
        PushGatewayTests().makeGateway(f, transport)
    }

    @Test(
        "Through the gateway: an iPhone and an Android phone each get the day's push once; FCM's answers judge only FCM devices",
        arguments: StoreKind.allCases
    )
    func gatewayAcrossChannels(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let c = try await f.store.createUser(try NewUser(tenant: f.acme, username: "c", passwordHash: "x"))
        let gone = "\(Self.fcmToken)gone"
        let refusedCredential = "\(Self.fcmToken)sender"
        // a: an iPhone and an Android phone. b: an iPhone and an Android phone FCM calls unregistered.
        // c: only an Android phone, whose push FCM refuses for the credential (sent once: it is not retried).
        _ = try await f.store.registerDevice(try f.device(f.a, token: String(format: "%064x", 1)))
        _ = try await f.store.registerDevice(try f.device(f.a, token: "\(Self.fcmToken)a", channel: .fcm))
        _ = try await f.store.registerDevice(try f.device(f.b, token: String(format: "%064x", 2)))
        _ = try await f.store.registerDevice(try f.device(f.b, token: gone, at: 1000, channel: .fcm))
        _ = try await f.store.registerDevice(try f.device(c, token: refusedCredential, channel: .fcm))
        let apns = ScriptedTransport()
        let fcm = ScriptedTransport(answers: [
            gone: .refused(
                channel: .fcm,
                status: 404,
                reason: "UNREGISTERED",
                outcome: .deviceGone(evidence: Date(timeIntervalSince1970: 2000))
            ),
            refusedCredential: .refused(
                channel: .fcm,
                status: 403,
                reason: "SENDER_ID_MISMATCH",
                outcome: .credentialRefused(reason: "SENDER_ID_MISMATCH")
            ),
        ])
        let gateway = gateway(f, ChannelRouter([.apns: apns, .fcm: fcm]))
        let running = Task { await gateway.run() }
        let forA = try await deliver(f, f.a)
        let forB = try await deliver(f, f.b)
        let forC = try await deliver(f, c)
        for delivery in [forA, forB, forC] { await gateway.enqueue(delivery) }
        #expect(
            try await eventually {
                let rows = try await [f.a, f.b].asyncMap {
                    try await f.store.deliveredImpulse(tenant: f.acme, user: $0.id, impulse: try ImpulseID("one"))
                }
                return rows.allSatisfy { $0?.delivery.pushedAt != nil } && fcm.sent.withLock { $0.count } == 3
            }
        )
        #expect(apns.sent.withLock { $0.map(\.delivery).sorted { $0.rawValue < $1.rawValue } } == [forA.id, forB.id])
        #expect(fcm.sent.withLock { $0.filter { $0.delivery == forA.id }.count } == 1)
        // FCM's unregistered removed b's Android phone and kept the iPhone; the refused credential judged no
        // device and paused nothing: the tenant is not paused, and c keeps the phone. (c's delivery has no
        // accepted push: it is not marked pushed.)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.b.id).map(\.channel) == [.apns])
        #expect(try await f.store.devices(tenant: f.acme, owner: c.id).count == 1)
        #expect(await gateway.snapshot().paused.isEmpty)
        running.cancel()
    }
}

extension ChannelRouterTests {
    @Test(
        "A delivery is marked pushed only once every device of its user accepted: an iPhone's answer does not settle it while the Android phone's is out",
        arguments: StoreKind.allCases
    )
    func earlyMarkWaitsForEveryDevice(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let android = "\(Self.fcmToken)slow"
        _ = try await f.store.registerDevice(try f.device(f.a, token: String(format: "%064x", 1)))
        _ = try await f.store.registerDevice(try f.device(f.a, token: android, channel: .fcm))
        let apns = ScriptedTransport()
        let fcm = GatedTransport(gated: [android])
        let gateway = gateway(f, ChannelRouter([.apns: apns, .fcm: fcm]))
        let running = Task { await gateway.run() }
        let delivery = try await deliver(f, f.a)
        await gateway.enqueue(delivery)
        func pushedAt() async throws -> Date? {
            try await f.store.deliveredImpulse(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"))?.delivery
                .pushedAt
        }
        // The iPhone accepted and the Android phone's push is held: a crash now must push the day again.
        #expect(try await eventually { apns.sent.withLock { $0.count } == 1 && fcm.awaiting.withLock { $0.now } == 1 })
        #expect(try await pushedAt() == nil)
        fcm.open()
        #expect(try await eventually { try await pushedAt() != nil })
        running.cancel()
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
