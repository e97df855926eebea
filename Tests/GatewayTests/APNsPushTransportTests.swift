import Engine
import Foundation
import Testing

@testable import Gateway

@Suite("APNs push transport")
struct APNsPushTransportTests {
    /// A batch mixing pushes that share a payload (same impulse, title and badge) with pushes that do not, in
    /// runs and alternating: the simulator must receive each push's own payload and deterministic apns-id.
    @Test("Each push of a batch carries its own payload and apns-id, shared payloads or not")
    func batchPayloads() async throws {
        let pair = try await APNsPair.start()
        let transport = APNsPushTransport(
            endpoints: [
                .production: APNsEndpoint(
                    host: "127.0.0.1",
                    port: pair.port,
                    tls: pair.clientTLS,
                    serverHostname: "localhost"
                )
            ],
            defaultIdentity: .token(pair.identity),
            logger: TestBroker.logger
        )
        let tenant = try TenantID("acme")
        let pushes = try (0..<60).map { index in
            OutboundPush(
                tenant: tenant,
                delivery: DeliveryID(Int64(1000 + index)),
                device: try Device(
                    tenant: tenant,
                    topic: APNsPair.topic,
                    token: APNsPair.token(index),
                    owner: UserID(Int64(index)),
                    name: "iPhone",
                    environment: .production,
                    registeredAt: Date()
                ),
                title: index < 20 ? "Breathe" : (index % 2 == 0 ? "Stretch" : "Walk \"outside\""),
                badge: index < 20 ? 1 : index % 5,
                impulse: try ImpulseID(index < 20 ? "breathe" : (index % 2 == 0 ? "stretch" : "walk"))
            )
        }
        let answers = await transport.send(batch: pushes) { _, _ in }
        await transport.shutdown()
        let accepted = Dictionary(uniqueKeysWithValues: pair.simulator.accepted.map { ($0.token, $0) })
        await pair.stop()

        #expect(answers.count == pushes.count)
        for (push, answer) in zip(pushes, answers) {
            let apnsID = APNsNotification.deterministicID(
                tenant.rawValue,
                push.delivery.description,
                push.device.token.rawValue
            )
            #expect(answer.result == .accepted(apnsID: apnsID))
            let expected = try ImpulsePayload(title: push.title, badge: push.badge, impulseID: push.impulse.rawValue)
                .encoded()
            let received = try #require(accepted[push.device.token.rawValue])
            #expect(received.payload == String(decoding: expected, as: UTF8.self))
            #expect(received.apnsID == apnsID)
            #expect(received.collapseID == push.collapseID)
        }
    }
}
