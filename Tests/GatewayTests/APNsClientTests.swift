import Crypto
import Engine
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import Synchronization
import TestSupport
import Testing

@testable import Gateway

/// An APNs simulator with one registered key, and a client for that key, over TLS on loopback.
struct APNsPair {
    let simulator: APNsSimulator
    let client: HTTP2PushClient
    let identity: APNsSigningIdentity
    let port: Int
    let clientTLS: TLSConfiguration

    static let topic = "com.acme.impulse"

    static func start(
        maxConcurrentStreams: UInt32 = 1000,
        deadline: Duration = .seconds(5),
        maximumConnections: Int = 2,
        unreachableWait: Duration = .seconds(60),
        tokenNow: @escaping @Sendable () -> Date = Date.init
    ) async throws -> APNsPair {
        let identity = APNsSigningIdentity(teamID: "TEAM123456", keyID: "KEY1234567", key: P256.Signing.PrivateKey())
        let (serverTLS, clientTLS) = try EnginePair.tls()
        let simulator = APNsSimulator(
            configuration: APNsSimulatorConfiguration(
                tls: serverTLS,
                maxConcurrentStreams: maxConcurrentStreams,
                keys: [identity.keyID: identity.publicKey],
                allowedTopics: [topic]
            )
        )
        let port = try await simulator.start()
        let client = HTTP2PushClient(
            configuration: HTTP2PushClientConfiguration(
                host: "127.0.0.1",
                port: port,
                tls: clientTLS,
                serverHostname: "localhost",
                maximumConnections: maximumConnections,
                requestDeadline: deadline,
                unreachableWait: unreachableWait
            ),
            authentication: .token(ProviderTokenCache(identity: identity, now: tokenNow)),
            logger: TestBroker.logger
        )
        return APNsPair(simulator: simulator, client: client, identity: identity, port: port, clientTLS: clientTLS)
    }

    func stop() async {
        await client.shutdown()
        await simulator.stop()
    }

    static func token(_ index: Int) -> DeviceToken {
        try! DeviceToken(String(format: "%064x", index))
    }

    static func notification(_ index: Int, collapse: String? = nil) throws -> APNsNotification {
        let payload = try ImpulsePayload(title: "Impulse \(index)", badge: 3, impulseID: "i\(index)").encoded()
        return try APNsNotification(
            token: token(index),
            topic: topic,
            apnsID: APNsNotification.deterministicID("acme", String(index)),
            collapseID: collapse,
            payload: payload
        )
    }

    /// Sends `count` pushes concurrently and returns their results in order.
    func burst(_ count: Int, offset: Int = 0) async throws -> [PushResult] {
        try await withThrowingTaskGroup(of: (Int, PushResult).self) { group in
            for index in 0..<count {
                let notification = try Self.notification(offset + index)
                group.addTask { (index, await client.send(notification)) }
            }
            var results = [PushResult?](repeating: nil, count: count)
            for try await (index, result) in group { results[index] = result }
            return results.compactMap { $0 }
        }
    }
}

@Suite("APNs client against the simulator", .timeLimit(.minutes(3)))
struct APNsClientTests {
    @Test("A push goes out with every header right; the connection starts at one stream and then follows SETTINGS")
    func accepted() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 500)
        let notification = try APNsPair.notification(1, collapse: "delivery-1")
        let result = await pair.client.send(notification)
        #expect(result == .accepted(apnsID: notification.apnsID))
        let push = try #require(pair.simulator.accepted.first)
        #expect(push.token == APNsPair.token(1).rawValue)
        #expect(push.topic == APNsPair.topic && push.pushType == "alert" && push.priority == 10 && push.expiration == 0)
        #expect(push.apnsID == notification.apnsID && push.collapseID == "delivery-1")
        let payload = try JSONSerialization.jsonObject(with: Data(push.payload.utf8)) as? [String: Any]
        let aps = try #require(payload?["aps"] as? [String: Any])
        #expect(aps["badge"] as? Int == 3 && aps["sound"] == nil)
        #expect((aps["alert"] as? [String: String])?["title"] == "Impulse 1")
        #expect(payload?["impulseID"] as? String == "i1")
        let connections = await pair.client.snapshot()
        #expect(connections.count == 1)
        #expect(connections.first?.verified == true)
        // The simulator raised its limit after the first success; the client follows it.
        #expect(try await eventually { await pair.client.snapshot().first?.maxStreams == 500 })
        await pair.stop()
    }

    @Test("A burst stays within the stream limit and every push is accepted exactly once")
    func burst() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 50)
        let results = try await pair.burst(600)
        #expect(results.allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(pair.simulator.counts.accepted == 600)
        #expect(Set(pair.simulator.accepted.map(\.token)).count == 600)
        for connection in await pair.client.snapshot() { #expect(connection.inFlight == 0) }
        await pair.stop()
    }

    @Test("An answered push gives its stream back at once: a hung one holds one stream, not its whole batch's")
    func streamsGivenBackPerAnswer() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 4, deadline: .seconds(40), maximumConnections: 1)
        // The first success verifies the connection; then it follows the simulator's four streams.
        #expect(
            await pair.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        #expect(try await eventually { await pair.client.snapshot().first?.maxStreams == 4 })
        var faults = SimulatorFaults()
        faults.hangNext = 1
        pair.simulator.setFaults(faults)
        let answered = Mutex(0)
        let first = try (1...4).map { try APNsPair.notification($0) }
        let hung = Task { await pair.client.send(batch: first) { _, _ in answered.withLock { $0 += 1 } } }
        #expect(try await eventually { answered.withLock { $0 } == 3 })
        #expect(try await eventually { await pair.client.snapshot().first?.inFlight == 1 })
        // Three streams are free while the fourth waits for its deadline: a second batch goes out on them now.
        let second = await pair.client.send(batch: try (5...7).map { try APNsPair.notification($0) })
        #expect(second.allSatisfy { if case .accepted = $0.result { true } else { false } })
        #expect(answered.withLock { $0 } == 3)
        await pair.stop()
        let results = await hung.value.map(\.result)
        #expect(results.count { if case .accepted = $0 { true } else { false } } == 3)
        #expect(results.count { if case .transportFailure = $0 { true } else { false } } == 1)
    }

    @Test("Token states and provider-token errors come back as APNs' reasons")
    func rejections() async throws {
        let pair = try await APNsPair.start()
        let since = Date(timeIntervalSince1970: 1_800_000_000)
        pair.simulator.setToken(APNsPair.token(2).rawValue, .unregistered(since: since))
        pair.simulator.setToken(APNsPair.token(3).rawValue, .otherTopic)
        pair.simulator.setToken(APNsPair.token(4).rawValue, .otherEnvironment)
        #expect(
            await pair.client.send(try APNsPair.notification(2))
                == .rejected(status: 410, reason: "Unregistered", timestamp: since)
        )
        #expect(
            await pair.client.send(try APNsPair.notification(3))
                == .rejected(status: 400, reason: "DeviceTokenNotForTopic", timestamp: nil)
        )
        #expect(
            await pair.client.send(try APNsPair.notification(4))
                == .rejected(status: 400, reason: "BadDeviceToken", timestamp: nil)
        )
        var wrongTopic = try APNsPair.notification(5)
        wrongTopic.topic = "com.other.app"
        #expect(await pair.client.send(wrongTopic) == .rejected(status: 400, reason: "TopicDisallowed", timestamp: nil))
        // A key the simulator does not know.
        let stranger = HTTP2PushClient(
            configuration: pair.client.configuration,
            authentication: .token(ProviderTokenCache(identity: .init(teamID: "T", keyID: "UNKNOWN", key: .init()))),
            logger: TestBroker.logger
        )
        #expect(
            await stranger.send(try APNsPair.notification(6))
                == .rejected(status: 403, reason: "InvalidProviderToken", timestamp: nil)
        )
        await stranger.shutdown()
        #expect(pair.simulator.counts.accepted == 0)
        await pair.stop()
    }

    @Test(
        "An hour-old provider token is ExpiredProviderToken; renewing within 20 minutes is TooManyProviderTokenUpdates"
    )
    func providerTokenRules() async throws {
        let pair = try await APNsPair.start(tokenNow: { Date().addingTimeInterval(-7200) })
        #expect(
            await pair.client.send(try APNsPair.notification(1))
                == .rejected(status: 403, reason: "ExpiredProviderToken", timestamp: nil)
        )
        await pair.stop()

        let fresh = try await APNsPair.start()
        #expect(
            await fresh.client.send(try APNsPair.notification(1))
                == .accepted(apnsID: try APNsPair.notification(1).apnsID)
        )
        let eager = HTTP2PushClient(
            configuration: fresh.client.configuration,
            authentication: .token(
                ProviderTokenCache(identity: fresh.identity, now: { Date().addingTimeInterval(300) })
            ),
            logger: TestBroker.logger
        )
        #expect(
            await eager.send(try APNsPair.notification(2))
                == .rejected(status: 429, reason: "TooManyProviderTokenUpdates", timestamp: nil)
        )
        await eager.shutdown()
        await fresh.stop()
    }

    @Test("REFUSED_STREAM is resent; a hung stream hits its deadline; a 503 window answers 503")
    func faults() async throws {
        // Long enough that a refused stream's resend fits on a loaded machine; the hung stream waits it out.
        // A 503 is resent after the pool's next attempts for at most `unreachableWait`, then answered.
        let pair = try await APNsPair.start(deadline: .seconds(2), unreachableWait: .seconds(1))
        #expect(
            await pair.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        var faults = SimulatorFaults()
        faults.refuseNext = 1
        pair.simulator.setFaults(faults)
        #expect(
            await pair.client.send(try APNsPair.notification(1))
                == .accepted(apnsID: try APNsPair.notification(1).apnsID)
        )
        faults = SimulatorFaults()
        faults.hangNext = 1
        pair.simulator.setFaults(faults)
        let hung = await pair.client.send(try APNsPair.notification(2))
        guard case .transportFailure(let description, let resendable) = hung else {
            Issue.record("expected a deadline failure, got \(hung)")
            return
        }
        #expect(description.contains("deadline") && !resendable)
        faults = SimulatorFaults()
        faults.unavailableUntil = Date().addingTimeInterval(60)
        pair.simulator.setFaults(faults)
        #expect(
            await pair.client.send(try APNsPair.notification(3))
                == .rejected(status: 503, reason: "ServiceUnavailable", timestamp: nil)
        )
        pair.simulator.setFaults(SimulatorFaults())
        #expect(pair.simulator.accepted.map(\.token) == [APNsPair.token(0).rawValue, APNsPair.token(1).rawValue])
        await pair.stop()
    }

    @Test("GOAWAY mid-burst loses nothing: unprocessed streams are resent on a new connection")
    func goAwayMidBurst() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 20)
        _ = try await pair.burst(1)
        var faults = SimulatorFaults()
        faults.goAwayReason = "Shutdown"
        pair.simulator.setFaults(faults)
        let results = try await pair.burst(200, offset: 1)
        #expect(results.allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(pair.simulator.counts.accepted == 201)
        #expect(Set(pair.simulator.accepted.map(\.token)).count == 201)
        #expect(await pair.client.counters.connectionsOpened >= 2)
        await pair.stop()
    }

    @Test("A stream limit dropped to 1 and raised again is followed without losing pushes")
    func streamLimitChanges() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 100)
        _ = try await pair.burst(1)
        pair.simulator.setStreamLimit(1)
        #expect(try await eventually { await pair.client.snapshot().first?.maxStreams == 1 })
        let narrow = try await pair.burst(50, offset: 1)
        pair.simulator.setStreamLimit(100)
        let wide = try await pair.burst(200, offset: 51)
        #expect((narrow + wide).allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(pair.simulator.counts.accepted == 251)
        await pair.stop()
    }

    @Test("Payloads over 4096 bytes and long collapse ids are refused before sending")
    func validation() throws {
        let big = Data(repeating: UInt8(ascii: "x"), count: 4097)
        #expect(throws: EngineError.self) { try APNsNotification(token: APNsPair.token(1), topic: "t", payload: big) }
        #expect(throws: EngineError.self) {
            try APNsNotification(
                token: APNsPair.token(1),
                topic: "t",
                collapseID: String(repeating: "c", count: 65),
                payload: Data("{}".utf8)
            )
        }
        #expect(APNsNotification.deterministicID("acme", "7") == APNsNotification.deterministicID("acme", "7"))
        #expect(APNsNotification.deterministicID("acme", "7") != APNsNotification.deterministicID("acme", "8"))
        #expect(UUID(uuidString: APNsNotification.deterministicID("acme", "7")) != nil)
        // Pinned: SHA-256 of "acme", 0x1F, "7" (computed outside Swift), so a resend keeps its apns-id across
        // versions of the broker.
        #expect(APNsNotification.deterministicID("acme", "7") == "06f503ba-0f4d-8212-b03b-2af45a22a490")
        // Three parts as the transport passes them (tenant, delivery, token), over more than one SHA-256 block.
        #expect(
            APNsNotification.deterministicID("acme", "123456", String(repeating: "ab", count: 32))
                == "94281d3f-c8ba-855c-9470-f0adf4c66b84"
        )
        for bad in [
            "", "06f503ba-0f4d-8212-b03b-2af45a22a49", "06f503ba-0f4d-8212-b03b-2af45a22a49g",
            "06f503ba00f4d-8212-b03b-2af45a22a490", "06f503ba-0f4d-8212-b03b-2af45a22a4900",
        ] {
            #expect(throws: EngineError.self) {
                try APNsNotification(token: APNsPair.token(1), topic: "t", apnsID: bad, payload: Data("{}".utf8))
            }
        }
        let upper = try APNsNotification(
            token: APNsPair.token(1),
            topic: "t",
            apnsID: "06F503BA-0F4D-8212-B03B-2AF45A22A490",
            payload: Data("{}".utf8)
        )
        #expect(upper.apnsID == "06f503ba-0f4d-8212-b03b-2af45a22a490")
    }

    @Test("Provider tokens are shared for 45 minutes and never renewed within 20")
    func tokenCache() async throws {
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        let identity = APNsSigningIdentity(teamID: "T", keyID: "K", key: .init())
        let cache = ProviderTokenCache(identity: identity, now: { clock.withLockedValue { $0 } })
        let first = try await cache.token()
        clock.withLockedValue { $0 += 10 * 60 }
        #expect(try await cache.token() == first)
        // Younger than 20 minutes: APNs would answer TooManyProviderTokenUpdates.
        #expect(try await cache.renew() == false)
        clock.withLockedValue { $0 += 34 * 60 }
        #expect(try await cache.token() == first)  // 44 minutes: still shared
        clock.withLockedValue { $0 += 2 * 60 }
        let second = try await cache.token()  // 46 minutes: renewed inside Apple's one-hour window
        #expect(second != first)
        let claims = try ProviderJWT.verify(second) { $0 == "K" ? identity.publicKey : nil }
        #expect(claims.teamID == "T" && claims.issuedAt == clock.withLockedValue { $0 })
        #expect(throws: ProviderJWTError.self) {
            try ProviderJWT.verify(second) { _ in P256.Signing.PrivateKey().publicKey }
        }
        clock.withLockedValue { $0 += 21 * 60 }
        #expect(try await cache.renew() == true)
        #expect(try await cache.token() != second)
    }
}
