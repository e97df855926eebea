import Crypto
import Engine
import Foundation
import InMemoryLogging
import Logging
import NIOSSL
import TestSupport
import Testing

@testable import Gateway

/// The APNs client's pool through outages, hung streams and lost connections, against the in-process simulator.
@Suite("APNs pool through outages", .timeLimit(.minutes(2)))
struct APNsOutageTests {
    /// A simulator that can be stopped and started again on the same port, and a client whose log is kept.
    final class Outage: Sendable {
        let identity = APNsSigningIdentity(teamID: "TEAM123456", keyID: "KEY1234567", key: P256.Signing.PrivateKey())
        let serverTLS: TLSConfiguration
        let client: HTTP2PushClient
        let log = InMemoryLogHandler()
        let port: Int
        let first: APNsSimulator

        init(deadline: Duration = .seconds(5)) async throws {
            let (serverTLS, clientTLS) = try EnginePair.tls()
            self.serverTLS = serverTLS
            (first, port) = try await Self.listen(serverTLS, identity: identity)
            var logger = Logger(label: "apns", factory: { [log] _ in log })
            logger.logLevel = .info
            client = HTTP2PushClient(
                configuration: HTTP2PushClientConfiguration(
                    host: "127.0.0.1",
                    port: port,
                    tls: clientTLS,
                    serverHostname: "localhost",
                    requestDeadline: deadline
                ),
                authentication: .token(ProviderTokenCache(identity: identity)),
                logger: logger
            )
        }

        static func configuration(
            _ tls: TLSConfiguration,
            port: Int,
            identity: APNsSigningIdentity
        ) -> APNsSimulatorConfiguration {
            APNsSimulatorConfiguration(
                port: port,
                tls: tls,
                keys: [identity.keyID: identity.publicKey],
                allowedTopics: [APNsPair.topic]
            )
        }

        /// A simulator on a port below Linux's ephemeral range (32768-60999): while it is stopped, no other test's
        /// outgoing connection can be given its port, so `restart()` can bind it again.
        static func listen(
            _ tls: TLSConfiguration,
            identity: APNsSigningIdentity
        ) async throws -> (APNsSimulator, Int) {
            var lastError: (any Error)?
            for _ in 0..<50 {
                let port = Int.random(in: 20_000..<32_000)
                let simulator = APNsSimulator(configuration: configuration(tls, port: port, identity: identity))
                do {
                    return (simulator, try await simulator.start())
                } catch {
                    lastError = error  // taken by another listener: try another
                }
            }
            throw lastError ?? CancellationError()
        }

        /// A new simulator on the same port (the first one must be stopped).
        func restart() async throws -> APNsSimulator {
            let simulator = APNsSimulator(configuration: Self.configuration(serverTLS, port: port, identity: identity))
            try await simulator.start()
            return simulator
        }

        var messages: [String] { log.entries.map(\.message.description) }
    }

    @Test("Pushes sent while APNs refuses connections wait for the pool's next attempt and go out once it is back")
    func refusedConnections() async throws {
        let outage = try await Outage()
        #expect(
            await outage.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        await outage.first.stop()  // connection refused from now on
        // The pool has seen its connection close (pushes in flight on a dying connection fail: not this test's case).
        #expect(try await eventually(seconds: 10) { await outage.client.snapshot().isEmpty })
        let pushes = try (1...100).map { try APNsPair.notification($0) }
        let sending = Task { await outage.client.send(batch: pushes).map(\.result) }
        // Refused connects: the pool probes one connect at a time, doubling its pause. Four failed probes take
        // 1.5 s (100 ms doubling); a failure per caller or connection would be a hundred at once.
        #expect(try await eventually(seconds: 30) { await outage.client.reachability.failures >= 4 })
        let during = await outage.client.reachability
        let back = try await outage.restart()
        let restarted = ContinuousClock.now
        let results = await sending.value
        let waited = restarted.duration(to: .now)
        #expect(results.allSatisfy { if case .accepted = $0 { true } else { false } }, "\(results.prefix(3))")
        #expect(back.counts.accepted == 100)
        // One failure per attempt, not one per caller and connection (before, the backoff reached 12-30 s within a
        // second).
        #expect((4...6).contains(during.failures), "\(during)")
        #expect(await outage.client.reachability.failures == 0)
        #expect(outage.messages.filter { $0.hasPrefix("APNs unreachable") }.count == 1, "\(outage.messages)")
        #expect(outage.messages.filter { $0 == "APNs reachable again" }.count == 1, "\(outage.messages)")
        print("refused connections: pushes accepted \(waited) after APNs came back")
        await outage.client.shutdown()
        await back.stop()
    }

    @Test("Pushes answered 503 during an APNs outage wait for the pool's next attempt and go out after it")
    func serviceUnavailableWindow() async throws {
        let outage = try await Outage()
        #expect(
            await outage.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        var faults = SimulatorFaults()
        faults.unavailableUntil = Date().addingTimeInterval(6)
        outage.first.setFaults(faults)
        let started = ContinuousClock.now
        let pushes = try (1...100).map { try APNsPair.notification($0) }
        let results = await outage.client.send(batch: pushes).map(\.result)
        #expect(results.allSatisfy { if case .accepted = $0 { true } else { false } }, "\(results.prefix(3))")
        #expect(outage.first.counts.accepted == 101)
        // Each attempt's 503s count once: a 6 s window doubling from 100 ms is a handful of attempts, and the
        // 100 pushes were not each sent at every one of them.
        #expect(outage.first.counts.rejected < 100 * 12, "\(outage.first.counts)")
        #expect(outage.messages.filter { $0.hasPrefix("APNs unreachable") }.count == 1, "\(outage.messages)")
        #expect(outage.messages.filter { $0 == "APNs reachable again" }.count == 1, "\(outage.messages)")
        print("503 window of 6 s: every push accepted after \(started.duration(to: .now))")
        await outage.client.shutdown()
        await outage.first.stop()
    }

    @Test("A stream that timed out retires its connection: the next push goes over a new one")
    func timedOutStreamRetiresConnection() async throws {
        // The deadline also bounds the next push's first stream on its new connection: 1 s was too tight on a
        // loaded CI machine (that push failed there once); 3 s keeps the hung stream's wait short.
        let outage = try await Outage(deadline: .seconds(3))
        #expect(
            await outage.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        var faults = SimulatorFaults()
        faults.hangNext = 1
        outage.first.setFaults(faults)
        guard case .transportFailure(let description, _) = await outage.client.send(try APNsPair.notification(1)) else {
            Issue.record("expected the hung stream to time out")
            return
        }
        #expect(description.contains("deadline"))
        let next = await outage.client.send(try APNsPair.notification(2))
        #expect(next == .accepted(apnsID: try APNsPair.notification(2).apnsID), "\(next)")
        #expect(await outage.client.counters.connectionsOpened == 2)
        #expect(outage.messages.contains { $0.hasPrefix("APNs connection retired") })
        await outage.client.shutdown()
        await outage.first.stop()
    }

    @Test("A GOAWAY is counted when it comes and the lost connection leaves the pool, with no push asking")
    func lostConnectionsCountedWhenLost() async throws {
        let outage = try await Outage()
        #expect(
            await outage.client.send(try APNsPair.notification(0))
                == .accepted(apnsID: try APNsPair.notification(0).apnsID)
        )
        #expect(await outage.client.snapshot().count == 1)
        outage.first.goAwayAll(reason: "Shutdown")
        #expect(try await eventually(seconds: 10) { await outage.client.counters.goAways == 1 })
        #expect(try await eventually(seconds: 10) { await outage.client.snapshot().isEmpty })
        // A connection that carried pushes and was then told to go is not an outage.
        #expect(await outage.client.reachability.failures == 0)
        #expect(
            await outage.client.send(try APNsPair.notification(1))
                == .accepted(apnsID: try APNsPair.notification(1).apnsID)
        )
        await outage.client.shutdown()
        await outage.first.stop()
    }
}
