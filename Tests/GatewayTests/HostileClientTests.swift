import AsyncHTTPClient
import Foundation
import Gateway
import NIOCore
import NIOSSL
import TestSupport
import Testing

/// A `broker demo` process (a real server with its own memory and CPU to measure) under attack from hand-made
/// HTTP/2 frames. Bounds are on the process's peak memory and CPU and on a legitimate client's answer; they are
/// far above what a defended server needs and far below what the attacks cost before their fixes.
struct AttackTarget {
    let process: RunningBroker
    let port: Int
    let directory: String

    /// `openFiles`: the process's open-file limit (soft and hard), as `prlimit` sets it.
    static func start(environment: [String: String] = [:], openFiles: Int? = nil) async throws -> AttackTarget {
        let directory = TestBroker.temporaryDirectory()
        let arguments = [
            "demo", "--listen", "127.0.0.1:0", "--data-dir", directory, "--log-level", "error", "--users", "0",
        ]
        let process = try RunningBroker(
            openFiles.map { ["--nofile=\($0):\($0)", BrokerProcess.executable.path] + arguments } ?? arguments,
            environment: ["BROKER_ADMIN_LISTEN": "off", "BROKER_SCHEDULER": "off"].merging(environment) { $1 },
            executable: openFiles == nil ? BrokerProcess.executable : URL(fileURLWithPath: "/usr/bin/prlimit")
        )
        let port = try #require(try await process.port(matching: /https:\/\/localhost:(\d+)/), "\(process.output)")
        return AttackTarget(process: process, port: port, directory: directory)
    }

    var usage: ProcessUsage? { ProcessUsage.of(process.process.processIdentifier) }

    /// Whether an authenticated `GET /CurrentImpulse` (anna, over TLS and HTTP/2) is answered 200.
    func legitimateRequestSucceeds() async throws -> Bool {
        var status = 0
        try await TestBroker.probe(port: port, directory: directory) { status = $0.status }
        return status == 200
    }

    func stop() async -> Int32 { await process.stop() }

    func terminate() { process.terminate() }

    static let basicAnna = "Basic " + Data("anna:demo".utf8).base64EncodedString()
}

@Suite("A hostile HTTP/2 client", .timeLimit(.minutes(3)))
struct HostileClientTests {
    /// 4,000 bytes in the HPACK dynamic table, then one-byte references to it: each byte decodes to 4 KB.
    static func bombBlock(path: String, references: Int) -> [UInt8] {
        RawHTTP2Client.request("GET", path, [("authorization", AttackTarget.basicAnna)])
            + RawHTTP2Client.indexedLiteral("x-bomb", String(repeating: "a", count: 4000))
            + [UInt8](repeating: RawHTTP2Client.indexed(62)[0], count: references)
    }

    @Test("HPACK bomb: the header list limit is announced and enforced as fields are decoded, not after")
    func hpackBomb() async throws {
        let target = try await AttackTarget.start()
        defer { target.terminate() }
        let before = try #require(target.usage)
        let client = try await RawHTTP2Client.connect(port: target.port)
        // The server's SETTINGS announce the limit (id 6, MAX_HEADER_LIST_SIZE).
        #expect(try await client.wait { $0.contains { $0.type == RawHTTP2Client.Frame.settings } })
        let settings = try #require(client.frames.first { $0.type == RawHTTP2Client.Frame.settings })
        var entries: [(UInt32, UInt32)] = []
        for offset in stride(from: 0, to: settings.payload.count, by: 6) {
            let payload = settings.payload
            entries.append(
                (
                    RawHTTP2Client.Frame.integer(payload[offset..<offset + 2]),
                    RawHTTP2Client.Frame.integer(payload[offset + 2..<offset + 6])
                )
            )
        }
        #expect(entries.contains { $0.0 == 6 && $0.1 == 16 * 1024 }, "\(entries)")

        // One HEADERS and two CONTINUATIONs, 48 KiB on the wire, about 190 MB decoded.
        let block = Self.bombBlock(path: "/v1/me", references: 16_000 * 3 - 5_000)
        let chunks = stride(from: 0, to: block.count, by: 16_000).map {
            Array(block[$0..<min($0 + 16_000, block.count)])
        }
        var frames = RawHTTP2Client.headers(stream: 1, chunks[0], endStream: true, endHeaders: chunks.count == 1)
        for (index, chunk) in chunks.enumerated().dropFirst() {
            frames += RawHTTP2Client.continuation(stream: 1, chunk, endHeaders: index == chunks.count - 1)
        }
        // Then ten streams left open (no END_STREAM), each with a 16 KB block worth 64 MB decoded.
        for stream in stride(from: UInt32(3), through: 21, by: 2) {
            frames += RawHTTP2Client.headers(
                stream: stream,
                Self.bombBlock(path: "/v1/me", references: 12_000),
                endStream: false
            )
        }
        try await client.send(frames)
        // Stream 1 is refused with 431; the open ones are refused and reset as soon as their blocks end.
        let refused = try await client.wait { _ in client.statuses.count == 11 }
        #expect(refused, "\(client.frames)")
        #expect(client.statuses.values.allSatisfy { $0 == 431 }, "\(client.statuses)")
        #expect(
            client.frames.contains { $0.type == RawHTTP2Client.Frame.rstStream && $0.stream == 3 && $0.errorCode == 0 }
        )
        #expect(!client.isClosed)
        #expect(try await target.legitimateRequestSucceeds())
        let after = try #require(target.usage)
        // Before the fix: 538 MiB for the open streams alone, 7.8 s of CPU for the first block.
        #expect(after.peakResident - before.resident < 150 << 20, "peak \(after.peakResident >> 20) MiB")
        #expect(after.cpuSeconds - before.cpuSeconds < 3, "CPU \(after.cpuSeconds - before.cpuSeconds) s")
        await client.close()
    }

    @Test("A body over the limit is answered 413 and its stream reset, not read to its end")
    func oversizedBodyIsReset() async throws {
        let target = try await AttackTarget.start(environment: ["BROKER_MAX_BODY_BYTES": "1024"])
        defer { target.terminate() }
        let client = try await RawHTTP2Client.connect(port: target.port)
        let block = RawHTTP2Client.request(
            "PUT",
            "/v1/devices/abababababababababababababababababababababababababababababababab",
            [("authorization", AttackTarget.basicAnna), ("content-type", "application/json")]
        )
        try await client.send(
            RawHTTP2Client.headers(stream: 1, block, endStream: false)
                + RawHTTP2Client.data(stream: 1, [UInt8](repeating: 0x20, count: 4000))
        )
        #expect(try await client.wait { _ in client.statuses[1] != nil }, "\(client.frames)")
        #expect(client.statuses[1] == 413)
        // RFC 9113 section 8.1: a complete answer, then RST_STREAM(NO_ERROR) so that the client stops sending.
        let reset = try await client.wait {
            $0.contains { $0.type == RawHTTP2Client.Frame.rstStream && $0.stream == 1 }
        }
        #expect(reset, "\(client.frames)")
        #expect(client.frames.first { $0.type == RawHTTP2Client.Frame.rstStream && $0.stream == 1 }?.errorCode == 0)
        // The answer's body came whole before the reset.
        let answer = client.frames.filter { $0.stream == 1 && $0.type == RawHTTP2Client.Frame.data }
        #expect(answer.last?.endStream == true)
        #expect(!client.isClosed)
        await client.close()
    }
}

@Suite("A hostile client of the APNs simulator", .timeLimit(.minutes(2)))
struct HostileSimulatorClientTests {
    static func start(_ arguments: [String] = []) async throws -> (RunningBroker, HTTP2ClientConnection) {
        let data = TestBroker.temporaryDirectory()
        let simulator = try RunningBroker(
            ["apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "error"] + arguments
        )
        let port = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#), "\(simulator.output)")
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(data + "/tls/self-signed.crt")
        let connection = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port,
            tls: tls,
            serverHostname: "localhost"
        )
        return (simulator, connection)
    }

    static func call(
        _ connection: HTTP2ClientConnection,
        _ method: String,
        _ path: String,
        _ body: String? = nil,
        headers: [HTTP2Header] = [RunningBroker.controlAuthorization]
    ) async throws -> HTTP2Message {
        try await connection.send(
            [
                HTTP2Header(":method", method), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                HTTP2Header(":authority", "localhost"),
            ] + headers,
            body: body.map { ByteBuffer(string: $0) },
            deadline: .seconds(10)
        )
    }

    static func push(
        _ connection: HTTP2ClientConnection,
        body: String = #"{"aps":{"alert":"hi"}}"#
    ) async throws
        -> HTTP2Message
    {
        try await call(
            connection,
            "POST",
            "/3/device/" + String(repeating: "ab", count: 32),
            body,
            headers: [HTTP2Header("apns-topic", "com.acme.impulse"), HTTP2Header("apns-push-type", "alert")]
        )
    }

    @Test("The control API needs its token; out-of-range numbers are refused with a problem, and nothing traps")
    func controlAPI() async throws {
        let (simulator, connection) = try await Self.start()
        defer { simulator.terminate() }
        #expect(try await Self.call(connection, "GET", "/_simulator/accepted", headers: []).status == 401)
        let wrong = [HTTP2Header("authorization", "Bearer not-the-token-at-all")]
        #expect(try await Self.call(connection, "DELETE", "/_simulator/accepted", headers: wrong).status == 401)
        // The scheme is case-insensitive.
        let lower = [HTTP2Header("authorization", "bearer \(RunningBroker.controlToken)")]
        #expect(try await Self.call(connection, "GET", "/_simulator/accepted", headers: lower).status == 200)
        for (body, member) in [
            (#"{"delayMilliseconds": 9223372036854775807}"#, "delayMilliseconds"),
            (#"{"latencyMilliseconds": 1e300}"#, "latencyMilliseconds"),
            (#"{"latencyMilliseconds": 5, "latencySpread": 1e300}"#, "latencySpread"),
            (#"{"hangNext": -1}"#, "hangNext"),
            (#"{"unavailableUntil": 1e300}"#, "unavailableUntil"),
            (#"{"goAwayReason": "\"}, {\"x"}"#, "goAwayReason"),
        ] {
            let answer = try await Self.call(connection, "PUT", "/_simulator/faults", body)
            #expect(answer.status == 400, "\(body)")
            #expect(answer["content-type"] == "application/problem+json")
            #expect(String(buffer: answer.body).contains(member), "\(String(buffer: answer.body))")
        }
        #expect(try await Self.call(connection, "POST", "/_simulator/goaway", #"{"reason": "a\"b"}"#).status == 400)
        #expect(try await Self.call(connection, "PUT", "/_simulator/tokens/" + "x", #"{"since": 1e300}"#).status == 400)
        // Still alive, and still pushing.
        #expect(try await Self.push(connection).status == 200)
        // The largest accepted values work.
        let largest = #"{"latencyMilliseconds": 600000, "latencySpread": 4, "delayMilliseconds": 0, "hangNext": 0}"#
        #expect(try await Self.call(connection, "PUT", "/_simulator/faults", largest).status == 204)
        #expect(try await Self.call(connection, "PUT", "/_simulator/faults", "{}").status == 204)
        #expect(try await Self.push(connection).status == 200)
        await connection.close()
        #expect(await simulator.stop() == 0)
    }

    @Test("HPACK bomb against the simulator's 1,000 streams: refused as decoded, memory stays flat")
    func hpackBomb() async throws {
        let (simulator, connection) = try await Self.start()
        defer { simulator.terminate() }
        let port = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#))
        let before = try #require(ProcessUsage.of(simulator.process.processIdentifier))
        let client = try await RawHTTP2Client.connect(port: port)
        var frames: [UInt8] = []
        // Fifty streams left open, each a 12 KB block worth 48 MB decoded: 2.4 GB if stored whole.
        for stream in stride(from: UInt32(1), through: 99, by: 2) {
            let block =
                RawHTTP2Client.request("POST", "/3/device/" + String(repeating: "ab", count: 32))
                + RawHTTP2Client.indexedLiteral("x-bomb", String(repeating: "a", count: 4000))
                + [UInt8](repeating: RawHTTP2Client.indexed(62)[0], count: 12_000)
            frames += RawHTTP2Client.headers(stream: stream, block, endStream: false)
        }
        try await client.send(frames)
        #expect(try await client.wait { _ in client.statuses.count == 50 }, "\(client.frames.count) frames")
        #expect(client.statuses.values.allSatisfy { $0 == 431 })
        let after = try #require(ProcessUsage.of(simulator.process.processIdentifier))
        #expect(after.peakResident - before.resident < 100 << 20, "peak \(after.peakResident >> 20) MiB")
        #expect(try await Self.push(connection).status == 200)
        await client.close()
        await connection.close()
    }

    @Test("Without a control token the control paths are not there; a body over 64 KiB is 413 PayloadTooLarge")
    func noControlAndLargeBodies() async throws {
        let (simulator, connection) = try await Self.start(["--no-control"])
        defer { simulator.terminate() }
        #expect(try await Self.call(connection, "GET", "/_simulator/accepted").status != 200)
        #expect(
            try await Self.call(connection, "PUT", "/_simulator/faults", #"{"unavailableUntil": 4000000000}"#).status
                != 204
        )
        #expect(try await Self.push(connection).status == 200)
        let large = try await Self.push(connection, body: String(repeating: "x", count: 2 << 20))
        #expect(large.status == 413)
        #expect(String(buffer: large.body).contains("PayloadTooLarge"))
        #expect(try await Self.push(connection).status == 200)
        await connection.close()
    }
}

@Suite("Passwords under attack", .timeLimit(.minutes(4)))
struct PasswordAttackTests {
    /// One login over TLS (HTTP/2) from 127.0.0.1, a new connection each time: its status and how long it took.
    static func login(_ target: AttackTarget, _ user: String, _ password: String) async throws -> (Int, Double) {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(target.directory + "/tls/self-signed.crt")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        defer { _ = client.shutdown() }
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(target.port)/v1/me")
        request.headers.add(
            name: "Authorization",
            value: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        )
        let started = ContinuousClock.now
        let response = try await client.execute(request, timeout: .seconds(60))
        _ = try await response.body.collect(upTo: 1 << 20)
        let took = started.duration(to: .now)
        return (
            Int(response.status.code), Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18
        )
    }

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    @Test("HEADERS+RST_STREAM floods and wrong-password floods cost bounded CPU; a real login stays quick")
    func bcryptAsAWeapon() async throws {
        let target = try await AttackTarget.start(
            environment: ["BROKER_BCRYPT_COST": "10", "BROKER_CREDENTIAL_CACHE_SECONDS": "0"]
        )
        defer { target.terminate() }
        // anna has logged in from here before (the address is then trusted for her).
        #expect(try await Self.login(target, "anna", "demo").0 == 200)
        let before = try #require(target.usage)

        // 1. Rapid reset with a bcrypt behind every stream: 5,000 pairs from another address, on fresh connections
        // whenever the server has had enough of one (GOAWAY).
        // Distinct guesses (identical ones would share a check), built once: hand-made frames are slow to build in
        // a debug build.
        let guesses = (0..<100).map {
            RawHTTP2Client.request("GET", "/v1/me", [("authorization", Self.basic("anna", "guess\($0)"))])
        }
        var sent = 0
        var stream: UInt32 = 1
        var connection = try await RawHTTP2Client.connect(port: target.port, from: "127.0.0.2")
        while sent < 5_000 {
            if connection.isClosed || stream > 1_999 {
                await connection.close()
                connection = try await RawHTTP2Client.connect(port: target.port, from: "127.0.0.2")
                stream = 1
            }
            var frames: [UInt8] = []
            for block in guesses {
                frames += RawHTTP2Client.headers(stream: stream, block) + RawHTTP2Client.reset(stream: stream)
                stream += 2
                sent += 1
            }
            try? await connection.send(frames)
        }
        await connection.close()

        // 2. Wrong passwords, 300 at once on three connections, for anna and for names that do not exist.
        var floods: [RawHTTP2Client] = []
        for round in 0..<3 {
            let flood = try await RawHTTP2Client.connect(port: target.port, from: "127.0.0.2")
            var frames: [UInt8] = []
            for index in 0..<100 {
                let user = index % 2 == 0 ? "anna" : "nobody\(index)"
                let block = RawHTTP2Client.request(
                    "GET",
                    "/v1/me",
                    [("authorization", Self.basic(user, "wrong-\(round)-\(index)"))]
                )
                frames += RawHTTP2Client.headers(stream: UInt32(1 + 2 * index), block)
            }
            try await flood.send(frames)
            floods.append(flood)
        }
        // While that runs, anna (uncached: the cache is off) and a user nobody attacks log in from 127.0.0.1.
        let (annaStatus, annaSeconds) = try await Self.login(target, "anna", "demo")
        let (benStatus, benSeconds) = try await Self.login(target, "ben", "demo")
        #expect(annaStatus == 200)
        #expect(benStatus == 200)
        // Before the fixes a valid login waited past 60 s behind the attack's checks.
        #expect(annaSeconds < 10 && benSeconds < 10, "anna \(annaSeconds) s, ben \(benSeconds) s")

        var answered: [[(String, String)]] = []
        for flood in floods {
            _ = try await flood.wait(seconds: 60) { frames in
                frames.count { $0.type == RawHTTP2Client.Frame.headers } >= 100
            }
            answered += flood.responses.values
            await flood.close()
        }
        let statuses = answered.compactMap { fields in fields.first { $0.0 == ":status" }.map(\.1) }
        #expect(statuses.count >= 290, "\(statuses.count) answers")
        #expect(Set(statuses).isSubset(of: ["401", "429", "503"]), "\(Set(statuses))")
        // Past the per-address and per-username limits, attempts are refused without a bcrypt, with a Retry-After.
        let refused = answered.filter { $0.contains { $0 == (":status", "429") } }
        #expect(refused.count >= 200, "\(refused.count) refused")
        #expect(refused.allSatisfy { fields in fields.contains { $0.0 == "retry-after" && Int($0.1) ?? 0 >= 1 } })

        let after = try #require(target.usage)
        // Before: 220 s of CPU for 5,000 pairs at cost 12 (and 300 checks at cost 10 are about 20 s).
        #expect(after.cpuSeconds - before.cpuSeconds < 20, "CPU \(after.cpuSeconds - before.cpuSeconds) s")
        #expect(after.peakResident - before.resident < 200 << 20, "peak \(after.peakResident >> 20) MiB")
        #expect(try await target.legitimateRequestSucceeds())
    }

    @Test("An unknown username takes as long as a wrong password, at the configured cost")
    func noUsernameEnumeration() async throws {
        let target = try await AttackTarget.start(environment: ["BROKER_BCRYPT_COST": "12"])
        defer { target.terminate() }
        // Measured in the server's CPU time, which the machine's load does not blur as it does wall time: an
        // attacker with a quiet server sees the same difference in answer times.
        let start = try #require(target.usage)
        for user in Demo.users {
            #expect(try await Self.login(target, user, "not-the-password").0 == 401)
        }
        let middle = try #require(target.usage)
        for index in Demo.users.indices {
            #expect(try await Self.login(target, "nobody-\(index)", "not-the-password").0 == 401)
        }
        let end = try #require(target.usage)
        let wrong = middle.cpuSeconds - start.cpuSeconds
        let unknown = end.cpuSeconds - middle.cpuSeconds
        // Before: a stand-in hash of cost 10 against the users' 12, a quarter of the work.
        #expect(unknown > 0.6 * wrong, "unknown users \(unknown) s of CPU, wrong passwords \(wrong) s")
    }
}

enum Demo {
    static let users = ["anna", "ben", "chen", "dora", "eli"]
}

@Suite("Connections that never speak", .timeLimit(.minutes(2)))
struct SilentConnectionTests {
    static let limits = [
        "BROKER_MAX_CONNECTIONS_PER_ADDRESS": "20", "BROKER_HANDSHAKE_TIMEOUT_SECONDS": "1",
        "BROKER_FIRST_REQUEST_TIMEOUT_SECONDS": "3",
    ]

    /// `count` TCP connections from 127.0.0.2 that send nothing at all.
    static func silent(_ count: Int, port: Int) async throws -> [RawHTTP2Client] {
        var connections: [RawHTTP2Client] = []
        for _ in 0..<count {
            connections.append(
                try await RawHTTP2Client.connect(port: port, preface: false, tls: false, from: "127.0.0.2")
            )
        }
        return connections
    }

    @Test("The broker closes them: beyond an address's share at once, the rest when the handshake is overdue")
    func broker() async throws {
        let target = try await AttackTarget.start(environment: Self.limits)
        defer { target.terminate() }
        // The soft open-file limit was raised to the hard one at start.
        let limits = try String(
            contentsOfFile: "/proc/\(target.process.process.processIdentifier)/limits",
            encoding: .utf8
        )
        let files = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let numbers = files.split(separator: " ").compactMap { Int($0) }
        #expect(numbers.count == 2 && numbers[0] == numbers[1], "\(files)")

        let connections = try await Self.silent(300, port: target.port)
        // 280 of them are over 127.0.0.2's share of 20 and are closed as soon as they are accepted.
        #expect(try await eventually(seconds: 10) { connections.count { $0.isClosed } >= 280 })
        // Meanwhile a client from another address is served.
        #expect(try await target.legitimateRequestSucceeds())
        // The other 20 never send a ClientHello: closed once the handshake deadline (1 s) has passed.
        #expect(try await eventually(seconds: 10) { connections.allSatisfy(\.isClosed) })
        // A connection that completes its handshake and then says nothing is closed after the first-request deadline.
        let quiet = try await RawHTTP2Client.connect(port: target.port, preface: false)
        #expect(!quiet.isClosed)
        #expect(try await eventually(seconds: 15) { quiet.isClosed })
        #expect(try await target.legitimateRequestSucceeds())
    }

    @Test(
        "Under a low open-file limit one address gets a quarter of the slots; the others stay for everyone else"
    )
    func lowFileLimit() async throws {
        // 1,024 descriptors: 512 are kept back, 512 connection slots remain; one address gets 128 of them.
        let target = try await AttackTarget.start(openFiles: 1024)
        defer { target.terminate() }
        let limits = try String(
            contentsOfFile: "/proc/\(target.process.process.processIdentifier)/limits",
            encoding: .utf8
        )
        let files = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        #expect(files.split(separator: " ").compactMap { Int($0) } == [1024, 1024], "\(files)")
        let connections = try await Self.silent(400, port: target.port)
        // Beyond its 128, 127.0.0.2's connections are closed as soon as they are accepted.
        #expect(try await eventually(seconds: 10) { connections.count { $0.isClosed } >= 272 })
        #expect(connections.count { !$0.isClosed } <= 128)
        // The other slots serve other addresses at once, long before the held ones' handshake deadline (10 s).
        let started = ContinuousClock.now
        #expect(try await target.legitimateRequestSucceeds())
        #expect(started.duration(to: .now) < .seconds(8))
    }

    @Test("An address's share and the handshake deadline follow the listener's room")
    func limitsUnderPressure() {
        let limits = ConnectionLimits(maxConnections: 512, maxConnectionsPerAddress: 1_000)
        #expect(limits.addressShare == 128)
        #expect(ConnectionLimits(maxConnections: 10_000, maxConnectionsPerAddress: 1_000).addressShare == 1_000)
        #expect(limits.handshakeTimeout(open: 383) == .seconds(10))
        #expect(limits.handshakeTimeout(open: 384) == .seconds(2))
        #expect(ConnectionLimits(handshakeTimeout: .seconds(3)).handshakeTimeout(open: 9_999) == .seconds(1))
    }

    @Test("The APNs simulator closes them too")
    func simulator() async throws {
        let data = TestBroker.temporaryDirectory()
        let simulator = try RunningBroker(
            ["apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "error"],
            environment: Self.limits
        )
        defer { simulator.terminate() }
        let port = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#), "\(simulator.output)")
        let connections = try await Self.silent(40, port: port)
        #expect(try await eventually(seconds: 10) { connections.allSatisfy(\.isClosed) })
    }
}

@Suite("A client that never opens its window", .timeLimit(.minutes(2)))
struct ZeroWindowTests {
    @Test(
        "Large answers stream as the window allows: a zero window holds little memory and is closed after the stall timeout"
    )
    func zeroWindow() async throws {
        let target = try await AttackTarget.start(environment: ["BROKER_STALL_TIMEOUT_SECONDS": "3"])
        defer { target.terminate() }
        let file = [UInt8]((0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try Data(file).write(to: URL(fileURLWithPath: target.directory + "/media/big.bin"))
        // Warm up: the file is served whole to a client with a normal window.
        #expect(try await target.legitimateRequestSucceeds())
        let before = try #require(target.usage)

        let client = try await RawHTTP2Client.connect(port: target.port, preface: false)
        var frames = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + RawHTTP2Client.settings([(0x4, 0)])
        for index in 0..<25 {
            frames += RawHTTP2Client.headers(
                stream: UInt32(1 + 2 * index),
                RawHTTP2Client.request("GET", "/media/big.bin")
            )
        }
        try await client.send(frames + RawHTTP2Client.settingsAck)
        // Every answer's headers come; no body can.
        #expect(try await client.wait { $0.count { $0.type == RawHTTP2Client.Frame.headers } >= 25 })
        #expect(client.statuses.values.allSatisfy { $0 == 200 })
        try await Task.sleep(for: .seconds(1))
        let during = try #require(target.usage)
        // Before: the 25 answers were held whole, 100 MB.
        #expect(during.resident - before.resident < 40 << 20, "grew \((during.resident - before.resident) >> 20) MiB")
        #expect(try await target.legitimateRequestSucceeds())
        // No progress for the stall timeout (3 s): GOAWAY and close.
        #expect(try await eventually(seconds: 15) { client.isClosed }, "\(client.frames.suffix(3))")
        #expect(client.frames.contains { $0.type == RawHTTP2Client.Frame.goAway && $0.errorCode == 0xb })
    }
}
