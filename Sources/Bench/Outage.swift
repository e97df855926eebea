import Crypto
import Engine
import Foundation
import Gateway
import Logging
import NIOSSL

/// Scenario 5: APNs goes away for N seconds while pushes are waiting, refusing connections (stopped) or
/// answering 503 (`unavailableUntil`); the result is how long after it came back every push was accepted.
/// The target (issue 20) is N + 15 s from the outage's start, that is 15 s after its end.
///
/// The APNs client runs against an in-process simulator over TLS on loopback; the pushes go out as one batch,
/// as the gateway sends them, when the outage begins.
enum Outage {
    static func run(seconds: [Int], pushes: Int, work: String) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench.outage")
        logger.logLevel = .error
        let files = try TLSFiles.configuredOrSelfSigned(
            certificatePath: nil,
            privateKeyPath: nil,
            directory: work,
            hostnames: ["localhost"],
            logger: logger
        )
        var clientTLS = TLSConfiguration.makeClientConfiguration()
        clientTLS.trustRoots = .file(files.certificatePath)
        let serverTLS = try files.serverConfiguration()
        var results: [[String: Any]] = []
        for kind in ["refused", "unavailable"] {
            for outage in seconds {
                FileHandle.standardError.write(Data("  outage: \(kind) for \(outage) s, \(pushes) pushes\n".utf8))
                results.append(
                    try await measure(
                        kind: kind,
                        outage: .seconds(outage),
                        pushes: pushes,
                        serverTLS: serverTLS,
                        clientTLS: clientTLS,
                        logger: logger
                    )
                )
            }
        }
        return ["runs": results, "targetSecondsAfterEnd": 15]
    }

    static func measure(
        kind: String,
        outage: Duration,
        pushes count: Int,
        serverTLS: TLSConfiguration,
        clientTLS: TLSConfiguration,
        logger: Logger
    ) async throws -> [String: Any] {
        let identity = APNsSigningIdentity(teamID: "TEAM123456", keyID: "KEY1234567", key: P256.Signing.PrivateKey())
        func simulator(port: Int) -> APNsSimulator {
            APNsSimulator(
                configuration: APNsSimulatorConfiguration(
                    port: port,
                    tls: serverTLS,
                    keys: [identity.keyID: identity.publicKey]
                )
            )
        }
        let first = simulator(port: 0)
        let port = try await first.start()
        let client = HTTP2PushClient(
            configuration: HTTP2PushClientConfiguration(
                host: "127.0.0.1",
                port: port,
                tls: clientTLS,
                serverHostname: "localhost"
            ),
            authentication: .token(ProviderTokenCache(identity: identity)),
            logger: logger
        )
        let topic = "com.example.bench"
        let notifications = try (0...count).map { index in
            try APNsNotification(
                token: DeviceToken(String(format: "%064x", index + 1)),
                topic: topic,
                apnsID: APNsNotification.deterministicID("bench", String(index)),
                payload: try ImpulsePayload(title: "Outage \(index)", badge: 1, impulseID: "i\(index)").encoded()
            )
        }
        // One push first: the pool is open and verified when the outage begins, as in a running broker.
        _ = await client.send(notifications[0])
        var serving = first
        let began = ContinuousClock.now
        if kind == "refused" {
            await first.stop()
            while !(await client.snapshot().isEmpty) { try await Task.sleep(for: .milliseconds(10)) }
        } else {
            var faults = SimulatorFaults()
            faults.unavailableUntil = Date().addingTimeInterval(Double(outage.components.seconds))
            first.setFaults(faults)
        }
        let sending = Task { await client.send(batch: Array(notifications.dropFirst())).map(\.result) }
        try await Task.sleep(until: began + outage, clock: .continuous)
        if kind == "refused" {
            serving = simulator(port: port)
            try await serving.start()
        }
        let ended = ContinuousClock.now
        let answers = await sending.value
        let afterEnd = ended.duration(to: .now)
        let accepted = answers.filter { if case .accepted = $0 { true } else { false } }.count
        let failures = await client.counters
        await client.shutdown()
        await serving.stop()
        return [
            "kind": kind, "outageSeconds": Double(outage.components.seconds), "pushes": count, "accepted": accepted,
            "secondsAfterEnd": Double(afterEnd.components.seconds) + Double(afterEnd.components.attoseconds) / 1e18,
            "connectionsOpened": failures.connectionsOpened,
        ]
    }
}
