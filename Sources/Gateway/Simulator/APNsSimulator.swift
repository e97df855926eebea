import Crypto
import Engine
import Foundation
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// Configuration of the APNs simulator.
public struct APNsSimulatorConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// Nil serves cleartext HTTP/2 (prior knowledge); APNs itself is TLS only.
    public var tls: TLSConfiguration?
    /// The stream limit announced once a connection's provider token has been accepted.
    public var maxConcurrentStreams: UInt32
    /// Provider-token keys by key id; empty accepts requests without `authorization` (certificate auth).
    public var keys: [String: P256.Signing.PublicKey]
    /// Topics accepted; nil accepts any.
    public var allowedTopics: Set<String>?
    /// Answer 200 to everything with minimal work: load tests then measure the sender, not the sink.
    public var benchmarkMode: Bool
    /// Accepted pushes kept for inspection (the oldest are dropped beyond it; the count goes on).
    public var recordLimit: Int
    /// The bearer token `/_simulator/` control requests must carry; nil turns the control API off (its paths are
    /// then answered like any unknown path). Anyone who can reach the port could otherwise change its faults.
    public var controlToken: String?
    /// Connections that stay silent this long are closed (APNs closes idle connections too).
    public var idleTimeout: Duration
    /// How many connections, and how long a new one may take to finish its handshake and speak.
    public var connectionLimits: ConnectionLimits
    /// FCM: the service accounts its token endpoint (`POST /token`) knows, by `client_email`.
    public var fcmAccounts: [String: FCMSimulatedAccount] = [:]

    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: TLSConfiguration?,
        maxConcurrentStreams: UInt32 = 1000,
        keys: [String: P256.Signing.PublicKey] = [:],
        allowedTopics: Set<String>? = nil,
        benchmarkMode: Bool = false,
        recordLimit: Int = 100_000,
        controlToken: String? = nil,
        idleTimeout: Duration = .seconds(300),
        connectionLimits: ConnectionLimits = ConnectionLimits(),
        fcmAccounts: [String: FCMSimulatedAccount] = [:]
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.maxConcurrentStreams = maxConcurrentStreams
        self.keys = keys
        self.allowedTopics = allowedTopics
        self.benchmarkMode = benchmarkMode
        self.recordLimit = recordLimit
        self.controlToken = controlToken
        self.idleTimeout = idleTimeout
        self.connectionLimits = connectionLimits
        self.fcmAccounts = fcmAccounts
    }
}

/// Faults to inject; counters apply to the next requests and run down.
public struct SimulatorFaults: Sendable, Codable, Equatable {
    /// Every answer waits this long.
    public var delayMilliseconds: Int = 0
    /// Every answer also waits a drawn time with this median, in milliseconds: APNs' round trip as a data centre
    /// sees it. Honoured in benchmark mode too, where the gateway's batching meets a realistic tail.
    public var latencyMilliseconds: Double = 0
    /// The standard deviation of the latency's natural logarithm (log-normal): 0 answers after the median
    /// exactly; 0.5 puts the 99th percentile at 3.2 times the median.
    public var latencySpread: Double = 0
    /// The next N requests are never answered.
    public var hangNext: Int = 0
    /// The next N requests get RST_STREAM(REFUSED_STREAM).
    public var refuseNext: Int = 0
    /// The next N requests close their connection instead of answering.
    public var dropNext: Int = 0
    /// The next request triggers a GOAWAY with this reason (and is not processed).
    public var goAwayReason: String?
    /// Until this moment every request gets 503 ServiceUnavailable.
    public var unavailableUntil: Date?
    /// In benchmark mode, this percentage of device tokens (chosen by a stable hash of the token) is dead: half
    /// answer 410 Unregistered, half 400 BadDeviceToken.
    public var deadTokenPercent: Int = 0
    /// FCM: the next N messages get 429 QUOTA_EXCEEDED.
    public var quotaExceededNext: Int = 0
    /// FCM: the `Retry-After` its 429 and 503 answers carry, in seconds (0: none).
    public var retryAfterSeconds: Int = 0
    /// FCM: the token endpoint's next N exchanges fail (500 internal_failure).
    public var tokenFailNext: Int = 0
    /// FCM: until this moment every token exchange fails (503 temporarily_unavailable): an outage of the
    /// endpoint while FCM's messages endpoint works.
    public var tokenUnavailableUntil: Date?

    public init() {}

    /// The largest delay or median latency, in milliseconds (ten minutes): a push's deadline is far below it.
    public static let maximumDelayMilliseconds = 600_000
    /// The largest latency spread: at 4, the 99th percentile is already 11,000 times the median.
    public static let maximumLatencySpread = 4.0
    /// The largest fault counter.
    public static let maximumCount = 1_000_000

    /// Every member is optional in JSON; a missing one keeps its default. A value out of its range is an error
    /// that names the member: nothing a client sends may make the simulator trap later.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func integer(_ key: CodingKeys, _ range: ClosedRange<Int>) throws -> Int {
            guard let value = try container.decodeIfPresent(Int.self, forKey: key) else { return 0 }
            guard range.contains(value) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: container,
                    debugDescription: "\(key.stringValue) must be \(range.lowerBound)-\(range.upperBound)"
                )
            }
            return value
        }
        func real(_ key: CodingKeys, _ upperBound: Double) throws -> Double {
            guard let value = try container.decodeIfPresent(Double.self, forKey: key) else { return 0 }
            guard value.isFinite, value >= 0, value <= upperBound else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: container,
                    debugDescription: "\(key.stringValue) must be a number from 0 to \(upperBound)"
                )
            }
            return value
        }
        delayMilliseconds = try integer(.delayMilliseconds, 0...Self.maximumDelayMilliseconds)
        hangNext = try integer(.hangNext, 0...Self.maximumCount)
        refuseNext = try integer(.refuseNext, 0...Self.maximumCount)
        dropNext = try integer(.dropNext, 0...Self.maximumCount)
        deadTokenPercent = try integer(.deadTokenPercent, 0...100)
        quotaExceededNext = try integer(.quotaExceededNext, 0...Self.maximumCount)
        retryAfterSeconds = try integer(.retryAfterSeconds, 0...3600)
        tokenFailNext = try integer(.tokenFailNext, 0...Self.maximumCount)
        latencyMilliseconds = try real(.latencyMilliseconds, Double(Self.maximumDelayMilliseconds))
        latencySpread = try real(.latencySpread, Self.maximumLatencySpread)
        goAwayReason = try container.decodeIfPresent(String.self, forKey: .goAwayReason)
        if let reason = goAwayReason,
            reason.utf8.count > 100 || reason.contains(where: { $0 == "\"" || $0 == "\\" })
                || reason.unicodeScalars.contains(where: { $0.value < 0x20 })
        {
            throw DecodingError.dataCorruptedError(
                forKey: .goAwayReason,
                in: container,
                debugDescription: "goAwayReason must be at most 100 bytes, without quotes, backslashes or controls"
            )
        }
        func moment(_ key: CodingKeys) throws -> Date? {
            guard let until = try container.decodeIfPresent(Double.self, forKey: key) else { return nil }
            guard until.isFinite, (0...1e11).contains(until) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key,
                    in: container,
                    debugDescription: "\(key.stringValue) must be epoch seconds"
                )
            }
            return Date(timeIntervalSince1970: until)
        }
        unavailableUntil = try moment(.unavailableUntil)
        tokenUnavailableUntil = try moment(.tokenUnavailableUntil)
    }

    /// A delay in milliseconds as a NIO time amount, clamped to the bound (never a trapping conversion).
    static func timeAmount(milliseconds: Double) -> TimeAmount {
        let bounded = milliseconds.isFinite ? min(max(0, milliseconds), Double(maximumDelayMilliseconds)) : 0
        return .nanoseconds(Int64(bounded * 1e6))
    }

    /// How long an answer waits, in milliseconds: the fixed delay plus a latency drawn from the log-normal
    /// distribution (Box-Muller from two uniform draws of `generator`).
    func answerDelay(using generator: inout some RandomNumberGenerator) -> Double {
        var delay = Double(delayMilliseconds)
        if latencyMilliseconds > 0 {
            var normal = 0.0
            if latencySpread > 0 {
                let u1 = Double.random(in: Double.ulpOfOne..<1, using: &generator)
                let u2 = Double.random(in: 0..<1, using: &generator)
                normal = (-2 * Foundation.log(u1)).squareRoot() * Foundation.cos(2 * Double.pi * u2)
            }
            delay += latencyMilliseconds * Foundation.exp(latencySpread * normal)
        }
        // A drawn latency can be far out in the tail (or infinite): no answer waits longer than the bound.
        return delay.isFinite
            ? min(delay, Double(Self.maximumDelayMilliseconds)) : Double(Self.maximumDelayMilliseconds)
    }
}

/// A faithful APNs provider API on the libnghttp2 engine, for tests, development and benchmarks.
///
/// Runs in-process (tests, the embedded default) or as `broker apns-simulator`. Requests under
/// `/_simulator/` are its control API (see `handleControl`).
public final class APNsSimulator: Sendable {
    struct State {
        var tokens: [String: SimulatedTokenState] = [:]
        var faults = SimulatorFaults()
        var accepted: [AcceptedPush] = []
        var acceptedCount = 0
        var rejectedCount = 0
        var lastIssuedAt: [String: Date] = [:]
        var verifiedConnections: Set<ObjectIdentifier> = []
        var connections: [ObjectIdentifier: HTTP2ServerConnection] = [:]
        var streamLimitOverride: UInt32?
        /// Connections that sent GOAWAY, with the last stream they promised to process.
        var goAwayLastStream: [ObjectIdentifier: Int32] = [:]
        /// FCM: the service accounts the token endpoint knows, by address.
        var fcmAccounts: [String: FCMSimulatedAccount] = [:]
        /// FCM: access tokens issued.
        var fcmIssued: [String: IssuedAccessToken] = [:]
        var fcmAccepted: [AcceptedFCMMessage] = []
        var fcmCounts = (accepted: 0, rejected: 0, tokensIssued: 0)
    }

    /// What one request may carry: APNs' own requests need a few hundred bytes of headers and at most 5 KiB of
    /// payload; larger ones are refused (431, 413 PayloadTooLarge) without being stored whole.
    static let maxHeaderListSize = 16 * 1024
    static let maximumBodySize = 64 * 1024

    let configuration: APNsSimulatorConfiguration
    let state = Mutex(State())
    private let server = Mutex<HTTP2Server?>(nil)
    let now: @Sendable () -> Date

    public init(configuration: APNsSimulatorConfiguration, now: @escaping @Sendable () -> Date = Date.init) {
        self.configuration = configuration
        self.now = now
        state.withLock { $0.fcmAccounts = configuration.fcmAccounts }
    }

    /// Starts listening; returns the bound port.
    @discardableResult
    public func start() async throws -> Int {
        // Token connections start at one stream until a push with a valid token succeeds, as APNs does.
        let initialLimit =
            configuration.keys.isEmpty || configuration.benchmarkMode ? configuration.maxConcurrentStreams : 1
        let server = try await HTTP2Server.bind(
            host: configuration.host,
            port: configuration.port,
            tls: configuration.tls,
            maxConcurrentStreams: initialLimit,
            maxHeaderListSize: Self.maxHeaderListSize,
            maximumBodySize: Self.maximumBodySize,
            idleTimeout: configuration.idleTimeout,
            connectionLimits: configuration.connectionLimits,
            onConnection: { [weak self] connection in
                guard let self else { return }
                self.state.withLock { $0.connections[ObjectIdentifier(connection.channel)] = connection }
                connection.channel.closeFuture.whenComplete { [weak self] _ in
                    self?.state.withLock {
                        $0.connections[ObjectIdentifier(connection.channel)] = nil
                        $0.verifiedConnections.remove(ObjectIdentifier(connection.channel))
                        $0.goAwayLastStream[ObjectIdentifier(connection.channel)] = nil
                    }
                }
            },
            onRequest: { [weak self] request, connection in self?.handle(request, connection) }
        )
        self.server.withLock { $0 = server }
        return server.port
    }

    /// The bound port while running.
    public var listeningPort: Int? { server.withLock { $0?.port } }

    public func stop() async {
        let server = self.server.withLock { server in
            defer { server = nil }
            return server
        }
        let connections = state.withLock { Array($0.connections.values) }
        for connection in connections { connection.drop() }
        await server?.close()
    }

    // MARK: Control (in-process; the same operations are reachable over `/_simulator/`)

    /// What the simulator knows of a device: an APNs token (hex, any case) or an FCM one (kept as written).
    public func setToken(_ token: String, _ tokenState: SimulatedTokenState) {
        state.withLock { $0.tokens[Self.tokenKey(token)] = tokenState }
    }

    /// APNs tokens are hex in any case; FCM's are case-sensitive.
    static func tokenKey(_ token: String) -> String {
        token.utf8.allSatisfy { $0 < 0x80 && Character(UnicodeScalar($0)).isHexDigit } ? token.lowercased() : token
    }

    public func setFaults(_ faults: SimulatorFaults) {
        state.withLock { $0.faults = faults }
    }

    /// Announces a new stream limit on every open connection (and for new ones).
    public func setStreamLimit(_ limit: UInt32) {
        let connections = state.withLock { state in
            state.streamLimitOverride = limit
            return Array(state.connections.values)
        }
        for connection in connections { connection.announce(maxConcurrentStreams: limit) }
    }

    /// Sends GOAWAY with a JSON reason on every open connection and closes them once their streams finish.
    public func goAwayAll(reason: String) {
        let connections = state.withLock { Array($0.connections.values) }
        for connection in connections {
            connection.goAway(errorCode: HTTP2ErrorCode.noError, debugData: #"{"reason":"\#(reason)"}"#)
        }
    }

    public var accepted: [AcceptedPush] { state.withLock { $0.accepted } }
    public var counts: (accepted: Int, rejected: Int) { state.withLock { ($0.acceptedCount, $0.rejectedCount) } }
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    public func clearRecord() {
        state.withLock {
            $0.accepted.removeAll()
            $0.acceptedCount = 0
            $0.rejectedCount = 0
        }
    }

    // MARK: Requests

    private func handle(_ request: HTTP2ServerRequest, _ connection: HTTP2ServerConnection) {
        let message = request.message
        if configuration.controlToken != nil, message[":path"]?.hasPrefix("/_simulator/") == true {
            handleControl(request)
            return
        }
        // Refused by the engine before they were stored whole: a body past its limit is Apple's 413, a header list
        // past the announced limit a 431.
        if message.bodyTooLarge || message.headersTooLarge {
            state.withLock { $0.rejectedCount += 1 }
            let (status, body) =
                message.bodyTooLarge ? (413, Self.reasonBody("PayloadTooLarge", timestamp: nil)) : (431, nil)
            request.respond(
                status: status,
                headers: body == nil ? [] : [HTTP2Header("content-type", "application/json")],
                body: body
            )
            return
        }
        if FCMValidation.project(ofPath: message[":path"]) != nil || message[":path"] == "/token" {
            handleFCM(request, connection)
            return
        }
        if configuration.benchmarkMode {
            // Minimal work: no validation, no record; a count, and a dead-token verdict when asked for.
            let faults = state.withLock { $0.faults }
            var generator = SystemRandomNumberGenerator()
            let dead = faults.deadTokenPercent
            let delay = faults.answerDelay(using: &generator)
            let status: Int
            let headers: [HTTP2Header]
            let body: ByteBuffer?
            if dead > 0, let token = message[":path"].map(Self.lastSegment), Self.isDead(token: token, dead) {
                let gone = stableHash(String(token), "kind") % 2 == 0
                state.withLock { $0.rejectedCount += 1 }
                status = gone ? 410 : 400
                headers = [HTTP2Header("content-type", "application/json")]
                body = Self.reasonBody(gone ? "Unregistered" : "BadDeviceToken", timestamp: gone ? now() : nil)
            } else {
                state.withLock { $0.acceptedCount += 1 }
                status = 200
                body = nil
                headers = [
                    HTTP2Header(
                        lowercased: "apns-id",
                        message["apns-id"] ?? "00000000-0000-0000-0000-000000000000",
                        indexed: false
                    )
                ]
            }
            if delay > 0 {
                request.eventLoop.scheduleTask(in: SimulatorFaults.timeAmount(milliseconds: delay)) {
                    request.respond(status: status, headers: headers, body: body)
                }
            } else {
                request.respond(status: status, headers: headers, body: body)
            }
            return
        }
        let connectionID = ObjectIdentifier(connection.channel)
        let now = self.now()
        let plan: Plan = state.withLock { state in
            if let fault = Self.fault(&state, request, connectionID) { return fault }
            if let until = state.faults.unavailableUntil, now < until {
                state.rejectedCount += 1
                return .answer(503, [], Self.reasonBody("ServiceUnavailable", timestamp: nil), announce: nil)
            }
            let tokens = state.tokens
            let validation = APNsValidation(
                allowedTopics: configuration.allowedTopics,
                keys: configuration.keys,
                tokenState: { tokens[$0] ?? .valid },
                now: now
            )
            let input = APNsValidation.Input(
                method: message[":method"],
                path: message[":path"],
                headers: { message[$0] },
                body: Data(message.body.readableBytesView)
            )
            switch validation.validate(input, lastIssuedAt: { state.lastIssuedAt[$0] }) {
            case .failure(let rejection):
                state.rejectedCount += 1
                return .answer(
                    rejection.status,
                    [],
                    Self.reasonBody(rejection.reason, timestamp: rejection.timestamp),
                    announce: nil
                )
            case .success(let (push, claims)):
                if let claims {
                    state.lastIssuedAt[claims.keyID] = max(
                        state.lastIssuedAt[claims.keyID] ?? .distantPast,
                        claims.issuedAt
                    )
                }
                state.acceptedCount += 1
                state.accepted.append(push)
                if state.accepted.count > configuration.recordLimit {
                    state.accepted.removeFirst(state.accepted.count / 10)
                }
                var announce: UInt32?
                if !configuration.keys.isEmpty, state.verifiedConnections.insert(connectionID).inserted {
                    announce = state.streamLimitOverride ?? configuration.maxConcurrentStreams
                }
                // New in every answer, like the request's: kept out of both sides' HPACK tables.
                return .answer(
                    200,
                    [HTTP2Header(lowercased: "apns-id", push.apnsID, indexed: false)],
                    nil,
                    announce: announce
                )
            }
        }
        execute(plan, request, connection)
    }

    /// What follows the last slash, found on the bytes: splitting the path into Characters was a quarter of the
    /// simulator's time in a benchmark with dead tokens.
    static func lastSegment(_ path: String) -> Substring {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return path[...] }
        return path[path.utf8.index(after: slash)...]
    }

    /// Whether a token falls in the dead percentage (a stable hash, so every run picks the same tokens).

    public static func isDead(token: Substring, _ percent: Int) -> Bool {
        Int(stableHash(String(token)) % 100) < percent
    }

    static func reasonBody(_ reason: String, timestamp: Date?) -> ByteBuffer {
        if let timestamp {
            return ByteBuffer(
                string: #"{"reason":"\#(reason)","timestamp":\#(Int64(timestamp.timeIntervalSince1970 * 1000))}"#
            )
        }
        return ByteBuffer(string: #"{"reason":"\#(reason)"}"#)
    }
}
