import Crypto
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Gateway

@Suite("APNs simulator validation")
struct APNsValidationTests {
    let key = P256.Signing.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let token = String(repeating: "ab", count: 32)

    func validate(
        method: String = "POST",
        path: String? = nil,
        headers: [String: String] = [:],
        body: String = #"{"aps":{}}"#,
        keys: Bool = true,
        lastIssuedAt: Date? = nil
    ) throws -> String {
        let identity = APNsSigningIdentity(teamID: "TEAM", keyID: "KID", key: key)
        var all = [
            "apns-topic": "com.acme.impulse",
            "authorization": "bearer " + (try ProviderJWT.sign(identity, issuedAt: now)),
        ]
        for (name, value) in headers { all[name] = value.isEmpty ? nil : value }
        let validation = APNsValidation(
            allowedTopics: ["com.acme.impulse"],
            keys: keys ? ["KID": key.publicKey] : [:],
            tokenState: { _ in .valid },
            now: now
        )
        let input = APNsValidation.Input(
            method: method,
            path: path ?? "/3/device/\(token)",
            headers: { all[$0] },
            body: Data(body.utf8)
        )
        switch validation.validate(input, lastIssuedAt: { _ in lastIssuedAt }) {
        case .success: return "accepted"
        case .failure(let rejection): return "\(rejection.status) \(rejection.reason)"
        }
    }

    @Test("Each malformed request gets Apple's status and reason, checked in Apple's order")
    func reasons() throws {
        #expect(try validate() == "accepted")
        #expect(try validate(headers: ["apns-id": "not-a-uuid"]) == "400 BadMessageId")
        #expect(try validate(method: "GET") == "405 MethodNotAllowed")
        #expect(try validate(method: "GET", headers: ["apns-id": "nope"]) == "400 BadMessageId")  // order
        #expect(try validate(headers: ["apns-topic": ""]) == "400 MissingTopic")
        #expect(try validate(headers: ["apns-topic": "com.other"]) == "400 TopicDisallowed")
        #expect(try validate(headers: ["apns-collapse-id": String(repeating: "c", count: 65)]) == "400 BadCollapseId")
        #expect(try validate(headers: ["apns-priority": "7"]) == "400 BadPriority")
        #expect(try validate(headers: ["apns-push-type": "telepathy"]) == "400 InvalidPushType")
        #expect(try validate(headers: ["apns-expiration": "soon"]) == "400 BadExpirationDate")
        #expect(try validate(path: "/2/device/\(token)") == "404 BadPath")
        #expect(try validate(path: "/3/device/") == "400 MissingDeviceToken")
        #expect(try validate(path: "/3/device/xyz") == "400 BadDeviceToken")
        #expect(try validate(headers: ["authorization": ""]) == "403 MissingProviderToken")
        #expect(try validate(headers: ["authorization": "bearer abc.def.ghi"]) == "403 InvalidProviderToken")
        #expect(try validate(lastIssuedAt: now.addingTimeInterval(-600)) == "429 TooManyProviderTokenUpdates")
        #expect(try validate(lastIssuedAt: now.addingTimeInterval(-1800)) == "accepted")
        #expect(try validate(body: "") == "400 PayloadEmpty")
        #expect(try validate(body: String(repeating: "x", count: 4097)) == "413 PayloadTooLarge")
        #expect(
            try validate(headers: ["apns-push-type": "voip"], body: String(repeating: "x", count: 5000)) == "accepted"
        )
        #expect(try validate(headers: ["authorization": ""], keys: false) == "accepted")  // certificate mode
    }
}

@Suite("APNs simulator modes and faults", .timeLimit(.minutes(3)))
struct APNsSimulatorModeTests {
    /// A simulator in benchmark mode on loopback TLS, and a client connection to it.
    func benchmarkSimulator(
        keys: [String: P256.Signing.PublicKey] = [:]
    ) async throws -> (APNsSimulator, HTTP2ClientConnection) {
        let (serverTLS, clientTLS) = try EnginePair.tls()
        let simulator = APNsSimulator(configuration: .init(tls: serverTLS, keys: keys, benchmarkMode: true))
        let port = try await simulator.start()
        let connection = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port,
            tls: clientTLS,
            serverHostname: "localhost"
        )
        return (simulator, connection)
    }

    @Test("Benchmark mode answers 200 to anything, counts but records nothing, and can declare a share of tokens dead")
    func benchmark() async throws {
        let (simulator, connection) = try await benchmarkSimulator(keys: ["K": P256.Signing.PrivateKey().publicKey])
        let reply = try await connection.send(EnginePair.post("/3/device/not-hex").0, deadline: .seconds(5))
        #expect(reply.status == 200)
        #expect(simulator.counts.accepted == 1 && simulator.accepted.isEmpty)
        #expect(try await connection.streamState().maxConcurrentStreams == 1000)
        var faults = SimulatorFaults()
        faults.deadTokenPercent = 30
        simulator.setFaults(faults)
        var statuses: [Int: Int] = [:]
        for n in 0..<300 {
            let token = String(format: "%064x", n)
            let answer = try await connection.send(EnginePair.post("/3/device/\(token)").0, deadline: .seconds(5))
            statuses[answer.status ?? 0, default: 0] += 1
            // The same tokens are dead in every run: the verdict is a stable hash of the token.
            #expect((answer.status != 200) == APNsSimulator.isDead(token: Substring(token), 30))
        }
        #expect((60...120).contains((statuses[410] ?? 0) + (statuses[400] ?? 0)), "\(statuses)")
        #expect((statuses[410] ?? 0) > 0 && (statuses[400] ?? 0) > 0)
        await connection.close()
        await simulator.stop()
    }

    @Test("Simulated latency is log-normal around its median, added to the fixed delay, and decoded from JSON")
    func latencyDistribution() throws {
        var faults = SimulatorFaults()
        var generator = SeededGenerator(seed: 7)
        #expect(faults.answerDelay(using: &generator) == 0)
        faults.delayMilliseconds = 3
        faults.latencyMilliseconds = 20
        #expect(faults.answerDelay(using: &generator) == 23)
        faults.delayMilliseconds = 0
        faults.latencySpread = 0.5
        let draws = (0..<20_000).map { _ in faults.answerDelay(using: &generator) }.sorted()
        let median = draws[draws.count / 2]
        let p99 = draws[draws.count * 99 / 100]
        // Log-normal with sigma 0.5: the median is the given one, the 99th percentile exp(0.5 * 2.326) = 3.2 times it.
        #expect(abs(median - 20) < 1, "median \(median)")
        #expect((2.9...3.5).contains(p99 / median), "p99 / median \(p99 / median)")
        #expect(draws.first! > 0)
        let decoded = try JSONDecoder().decode(
            SimulatorFaults.self,
            from: Data(#"{"latencyMilliseconds": 12.5, "latencySpread": 0.5}"#.utf8)
        )
        #expect(decoded.latencyMilliseconds == 12.5 && decoded.latencySpread == 0.5)
        // Out of range is an error, not a value clamped or a trap later.
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(SimulatorFaults.self, from: Data(#"{"latencySpread": -1}"#.utf8))
        }
        // Even the largest spread cannot draw a delay past the bound.
        faults.latencyMilliseconds = Double(SimulatorFaults.maximumDelayMilliseconds)
        faults.latencySpread = SimulatorFaults.maximumLatencySpread
        let extreme = (0..<2_000).map { _ in faults.answerDelay(using: &generator) }
        #expect(extreme.allSatisfy { $0.isFinite && $0 <= Double(SimulatorFaults.maximumDelayMilliseconds) })
    }

    @Test("Benchmark mode holds its answers back by the simulated latency")
    func benchmarkLatency() async throws {
        let (simulator, connection) = try await benchmarkSimulator()
        var faults = SimulatorFaults()
        faults.latencyMilliseconds = 40
        simulator.setFaults(faults)
        let start = ContinuousClock.now
        let reply = try await connection.send(
            EnginePair.post("/3/device/\(String(repeating: "a", count: 64))").0,
            deadline: .seconds(5)
        )
        #expect(reply.status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(40))
        await connection.close()
        await simulator.stop()
    }

    @Test("Delays hold answers back; a dropped connection fails only its requests; the pool opens more connections")
    func delaysDropsAndSaturation() async throws {
        let pair = try await APNsPair.start(maxConcurrentStreams: 4, maximumConnections: 3)
        _ = try await pair.burst(1)
        var faults = SimulatorFaults()
        faults.delayMilliseconds = 20
        pair.simulator.setFaults(faults)
        let start = ContinuousClock.now
        let delayed = try await pair.burst(40, offset: 1)
        #expect(delayed.allSatisfy { if case .accepted = $0 { true } else { false } })
        #expect(ContinuousClock.now - start >= .milliseconds(20))
        // Four streams per connection were not enough for 40 concurrent pushes: the pool opened more.
        #expect(await pair.client.counters.connectionsOpened >= 2)
        #expect(await pair.client.snapshot().count <= 3)
        faults = SimulatorFaults()
        faults.dropNext = 1
        pair.simulator.setFaults(faults)
        let dropped = await pair.client.send(try APNsPair.notification(100))
        if case .transportFailure = dropped {} else { Issue.record("expected a transport failure, got \(dropped)") }
        #expect(
            await pair.client.send(try APNsPair.notification(101))
                == .accepted(apnsID: try APNsPair.notification(101).apnsID)
        )
        await pair.stop()
    }

    @Test("An idle connection answers PING")
    func ping() async throws {
        let pongs = NIOLockedCounter()
        let answer: @Sendable (HTTP2ServerRequest, HTTP2ServerConnection) -> Void = { request, _ in
            request.respond(status: 200)
        }
        let pair = try await EnginePair.start(
            onEvent: { if case .pingAcknowledged = $0 { pongs.increment() } },
            onRequest: answer
        )
        pair.client.ping()
        #expect(try await eventually { pongs.value == 1 })
        await pair.stop()
    }
}

/// A thread-safe counter for event-loop callbacks.
final class NIOLockedCounter: Sendable {
    private let box = Synchronization.Mutex(0)
    func increment() { box.withLock { $0 += 1 } }
    var value: Int { box.withLock { $0 } }
}

/// SplitMix64: the same draws in every run.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
