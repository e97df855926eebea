import Engine
import Foundation
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// How the broker proves itself to a push service.
public enum PushAuthentication: Sendable {
    /// APNs' provider token (JWT) shared by every connection of the identity.
    case token(ProviderTokenCache)
    /// An OAuth2 access token (FCM's), from a source that caches and refreshes it.
    case accessToken(any AccessTokenSource)
    /// TLS client certificate, configured in `HTTP2PushClientConfiguration.tls`.
    case certificate

    /// Whether a connection carries one stream until a push on it is accepted (a token may be refused).
    var provesByToken: Bool {
        if case .certificate = self { false } else { true }
    }
}

/// Where a bearer access token comes from: cached, and refreshed before it expires or when the service refused it.
public protocol AccessTokenSource: Sendable {
    /// A valid access token.
    func token() async throws -> String
    /// Forgets `refused` (the service answered 401 to it): the next `token()` is a fresh one.
    func invalidate(_ refused: String) async
}

/// What one push service's HTTP/2 API means to the pool that sends to it: its name in logs, how an answer maps
/// into a `PushResult`, an accepted push's id, and how it asks for a pause.
public struct PushDialect: Sendable {
    public var name: String
    /// The answer as a `PushResult` (every status; 200 is `accepted` with `acceptedID`).
    public var result: @Sendable (HTTP2Message) -> PushResult
    /// The id a 200 answer gives the push (APNs' `apns-id`, FCM's message name).
    public var acceptedID: @Sendable (HTTP2Message) -> String
    /// APNs: a 503 is waited out in the pool (it pauses until its next attempt) and the push sent again within
    /// its patience. Otherwise the answer goes back to the gateway's retries, and `pauseAsked` pauses the pool.
    public var waitsOutUnavailable: Bool
    /// A pause the service asked every sender for (FCM's `Retry-After` on 429 and 503): nothing is sent over the
    /// pool's connections until it ends. Its quota is paced, not hammered.
    public var pauseAsked: @Sendable (HTTP2Message) -> Duration?
    /// What a push answers when no token to authenticate with can be had (a refused grant is the credential's
    /// failure; anything else a resendable transport failure).
    public var authorizationFailure: @Sendable (any Error) -> PushResult

    public init(
        name: String,
        result: @escaping @Sendable (HTTP2Message) -> PushResult,
        acceptedID: @escaping @Sendable (HTTP2Message) -> String,
        waitsOutUnavailable: Bool,
        pauseAsked: @escaping @Sendable (HTTP2Message) -> Duration? = { _ in nil },
        authorizationFailure: @escaping @Sendable (any Error) -> PushResult = {
            .transportFailure(description: "cannot get a token to authenticate with: \($0)", resendable: true)
        }
    ) {
        self.name = name
        self.result = result
        self.acceptedID = acceptedID
        self.waitsOutUnavailable = waitsOutUnavailable
        self.pauseAsked = pauseAsked
        self.authorizationFailure = authorizationFailure
    }

    public static let apns = PushDialect(
        name: "APNs",
        result: HTTP2PushClient.apnsResult(of:),
        acceptedID: { $0["apns-id"] ?? "" },
        waitsOutUnavailable: true
    )
}

/// One request to a push service: its header block and body.
public protocol PushRequest: Sendable {
    func headerBlock(authority: String, authorization: String?) -> HTTP2HeaderBlock
    var payload: Data { get }
}

/// Configuration of one push client (one tenant identity and environment, or one FCM service account).
public struct HTTP2PushClientConfiguration: Sendable {
    public var host: String
    public var port: Int
    /// Trust roots and, for certificate auth, the client certificate (PEM or PKCS#12 loaded by the caller).
    public var tls: TLSConfiguration
    public var serverHostname: String?
    /// Connections opened when the ones there are have no free stream.
    public var maximumConnections: Int
    /// Every request gets an answer or fails within this time.
    public var requestDeadline: Duration
    public var connectTimeout: Duration
    /// Requests waiting for a free stream beyond which `send` fails fast (memory stays bounded).
    public var maximumWaiting: Int
    /// First and largest pause between connection attempts while the service cannot be reached (jittered, doubling):
    /// after an outage the next attempt comes at most `maximumReconnectBackoff` after it ends.
    public var reconnectBackoff: Duration
    public var maximumReconnectBackoff: Duration
    /// How long a push waits for an unreachable service (through the pool's next attempts) before it fails and its
    /// own retries (then the gateway's sweep) take over.
    public var unreachableWait: Duration

    public init(
        host: String,
        port: Int,
        tls: TLSConfiguration = .makeClientConfiguration(),
        serverHostname: String? = nil,
        maximumConnections: Int = 4,
        requestDeadline: Duration = .seconds(15),
        connectTimeout: Duration = .seconds(10),
        maximumWaiting: Int = 10_000,
        reconnectBackoff: Duration = .milliseconds(100),
        maximumReconnectBackoff: Duration = .seconds(10),
        unreachableWait: Duration = .seconds(60)
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.serverHostname = serverHostname
        self.maximumConnections = max(1, maximumConnections)
        self.requestDeadline = requestDeadline
        self.connectTimeout = connectTimeout
        self.maximumWaiting = maximumWaiting
        self.reconnectBackoff = reconnectBackoff
        self.maximumReconnectBackoff = maximumReconnectBackoff
        self.unreachableWait = unreachableWait
    }
}

/// Sends pushes to one push service (APNs, FCM: its `dialect`) over a pool of HTTP/2 connections on the
/// libnghttp2 engine.
///
/// In-flight streams never exceed what the server allows: a token connection carries one stream until a push
/// succeeds, then follows SETTINGS_MAX_CONCURRENT_STREAMS as it changes. When every connection is full it opens
/// another, up to the limit, then callers wait (bounded). GOAWAY drains a connection; REFUSED_STREAM and
/// streams above a GOAWAY are resent; reconnects back off with jitter.
public actor HTTP2PushClient {
    /// A connection's state that its event loop updates (GOAWAY, close) and the pool reads.
    final class Link: Sendable {
        let connection: HTTP2ClientConnection
        let draining = Atomic<Bool>(false)
        let maxStreams = Atomic<UInt32>(1)
        /// Streams leased and not yet answered: the pool adds what it leases, and each answer gives its stream
        /// back at once on the event loop, not when the slowest answer of its batch comes.
        let leased = Atomic<Int>(0)
        /// Set once, by the event loop, when GOAWAY or the close comes (or when the pool retires it).
        let lost = Atomic<Bool>(false)
        /// The pool's reconnect round when it was opened.
        let round: Int
        init(connection: HTTP2ClientConnection, round: Int) {
            self.connection = connection
            self.round = round
        }
        var isOpen: Bool { !draining.load(ordering: .relaxed) && connection.channel.isActive }
    }

    struct Pooled {
        let link: Link
        var verified: Bool
        var lastUsed = ContinuousClock.now
        /// Whether the service accepted a push on it.
        var carriedPushes = false
    }

    public nonisolated let configuration: HTTP2PushClientConfiguration
    let authentication: PushAuthentication
    public nonisolated let dialect: PushDialect
    let logger: Logger
    var pool: [ObjectIdentifier: Pooled] = [:]
    var connecting = 0
    var waiters: [CheckedContinuation<Void, Never>] = []
    /// Set by a caller about to wait for a stream; the event loop that gives a stream back clears it and wakes
    /// the waiters (one hop per wait, not one per answer).
    nonisolated let streamWanted = Atomic<Bool>(false)
    var schedule: ReconnectSchedule
    var stats = (sent: 0, connectionsOpened: 0)
    /// Connections lost to GOAWAY or a close, counted by the event loop when it happens.
    nonisolated let losses = Atomic<Int>(0)
    /// Decides which answers retire their connection (those whose retry needs a new one).
    let policy = PushOutcomePolicy()

    public init(
        configuration: HTTP2PushClientConfiguration,
        authentication: PushAuthentication,
        dialect: PushDialect = .apns,
        logger: Logger
    ) {
        self.configuration = configuration
        self.authentication = authentication
        self.dialect = dialect
        self.logger = logger
        self.schedule = ReconnectSchedule(
            initialBackoff: configuration.reconnectBackoff,
            maximumBackoff: configuration.maximumReconnectBackoff
        )
    }

    /// Sends one push; never throws: every failure is a `PushResult` the outcome policy understands.
    public func send(_ notification: some PushRequest) async -> PushResult {
        let headers: HTTP2HeaderBlock
        do {
            headers = notification.headerBlock(authority: configuration.host, authorization: try await authorization())
        } catch {
            return dialect.authorizationFailure(error)
        }
        let body = ByteBuffer(bytes: notification.payload)
        let giveUpAt = ContinuousClock.now + configuration.unreachableWait
        var attempt = 0
        // The latest 503, answered when APNs stays unavailable past the push's patience.
        var unavailableAnswer: PushResult?
        while true {
            attempt += 1
            let lease: Link
            switch await acquire(upTo: 1, giveUpAt: giveUpAt) {
            case .success(let leased): lease = leased.link
            case .failure(let reason):
                return unavailableAnswer ?? .transportFailure(description: reason.description, resendable: true)
            }
            let round = schedule.round
            do {
                let response = try await lease.connection.send(
                    headers,
                    body: body,
                    deadline: TimeAmount(configuration.requestDeadline)
                )
                giveBack(lease, streams: 1)
                let result = dialect.result(response)
                settle(lease, accepted: response.status == 200, retire: retires(result))
                stats.sent += 1
                if let pause = dialect.pauseAsked(response) { hold(for: pause) }
                // APNs is unavailable: wait for the pool's next attempt and send again, within the push's patience.
                if dialect.waitsOutUnavailable, case .rejected(503, let reason, _) = result,
                    ContinuousClock.now < giveUpAt
                {
                    unavailable(round: round, reason: reason)
                    unavailableAnswer = result
                    continue
                }
                return result
            } catch let error as HTTP2EngineError {
                giveBack(lease, streams: 1)
                settle(lease, accepted: false, retire: error.code == .deadlineExceeded)
                // Not processed by the service (REFUSED_STREAM, above a GOAWAY): resend at once, at most twice.
                if error.code == .notProcessed, attempt < 3 { continue }
                return .transportFailure(description: error.description, resendable: error.code == .notProcessed)
            } catch {
                giveBack(lease, streams: 1)
                return .transportFailure(description: "\(error)", resendable: false)
            }
        }
    }

    /// Sends several pushes with as few hops as possible: streams are leased in chunks, each chunk goes to its
    /// connection's event loop in one hop and one write. Answers come in the order given; like `send`, every
    /// failure is a `PushResult`. Streams not processed by the service (REFUSED_STREAM, above a GOAWAY) are resent, at
    /// most twice.
    ///
    /// Each answer gives its stream back as it comes, so a slow answer holds one stream, not its whole chunk's;
    /// `onAnswer` runs then too (on the event loop), for every answer that came over a connection, with the
    /// push's index and, when the service accepted it, its id (a resent push may be reported more than once).
    public func send(
        batch notifications: [some PushRequest],
        onAnswer: (@Sendable (_ index: Int, _ acceptedID: String?) -> Void)? = nil
    ) async -> [PushAnswer] {
        let authorization: String?
        do {
            authorization = try await self.authorization()
        } catch {
            let failure = dialect.authorizationFailure(error)
            return notifications.map { _ in PushAnswer(result: failure, latency: .zero) }
        }
        // Pushes in a row with the same payload (a batch's, mostly) share one buffer: its bytes are only read.
        var last: (payload: Data, body: ByteBuffer)?
        let requests = notifications.map { notification -> (headers: HTTP2HeaderBlock, body: ByteBuffer?) in
            let body: ByteBuffer
            if let last, last.payload == notification.payload {
                body = last.body
            } else {
                body = ByteBuffer(bytes: notification.payload)
                last = (notification.payload, body)
            }
            return (notification.headerBlock(authority: configuration.host, authorization: authorization), body)
        }
        let deadline = TimeAmount(configuration.requestDeadline)
        let giveUpAt = ContinuousClock.now + configuration.unreachableWait
        var answers = [PushAnswer?](repeating: nil, count: notifications.count)
        // The latest 503 of pushes sent again, answered when APNs stays unavailable past their patience.
        var unavailableAnswers: [Int: PushAnswer] = [:]
        var todo = Array(notifications.indices)
        var attempt = 0
        while !todo.isEmpty {
            attempt += 1
            var resend: [Int] = []
            let round = schedule.round
            var unavailableReason: String?
            await withTaskGroup(of: (indices: [Int], answers: [HTTP2Answer]).self) { group in
                var rest = todo[...]
                while !rest.isEmpty {
                    switch await acquire(upTo: rest.count, giveUpAt: giveUpAt) {
                    case .success(let lease):
                        let indices = Array(rest.prefix(lease.granted))
                        rest = rest.dropFirst(lease.granted)
                        let chunk = indices.map { requests[$0] }
                        group.addTask {
                            // Each stream is given back exactly once: by its answer, or after the chunk when no
                            // answer came for it (a connection that never took the requests).
                            let held = HeldPlaces(indices.count)
                            let answers = await lease.link.connection.send(batch: chunk, deadline: deadline) {
                                position,
                                response in
                                if held.take(1) > 0 { self.giveBack(lease.link, streams: 1) }
                                guard let onAnswer else { return }
                                let accepted = response.flatMap { $0.status == 200 ? self.dialect.acceptedID($0) : nil }
                                onAnswer(indices[position], accepted)
                            }
                            let unanswered = held.takeAll()
                            if unanswered > 0 { self.giveBack(lease.link, streams: unanswered) }
                            // Here, not when the batch is collected: an accepted push verifies a token connection,
                            // whose limit then rises for the chunks still being leased.
                            await self.settle(lease.link, answers: answers)
                            return (indices, answers)
                        }
                    case .failure(let reason):
                        let failure = PushResult.transportFailure(description: reason.description, resendable: true)
                        for index in rest {
                            answers[index] = unavailableAnswers[index] ?? PushAnswer(result: failure, latency: .zero)
                        }
                        rest = rest[rest.endIndex...]
                    }
                }
                for await chunk in group {
                    for (index, answer) in zip(chunk.indices, chunk.answers) {
                        let latency = Duration.nanoseconds(answer.latency.nanoseconds)
                        switch answer.result {
                        case .success(let response)
                        where dialect.waitsOutUnavailable && response.status == 503 && ContinuousClock.now < giveUpAt:
                            // APNs is unavailable: sent again after the pool's next attempt.
                            stats.sent += 1
                            let result = dialect.result(response)
                            if unavailableReason == nil, case .rejected(_, let reason, _) = result {
                                unavailableReason = reason
                            }
                            unavailableAnswers[index] = PushAnswer(result: result, latency: latency)
                            resend.append(index)
                        case .success(let response):
                            stats.sent += 1
                            if let pause = dialect.pauseAsked(response) { hold(for: pause) }
                            answers[index] = PushAnswer(result: dialect.result(response), latency: latency)
                        case .failure(let error) where error.code == .notProcessed && attempt < 3:
                            resend.append(index)
                        case .failure(let error):
                            answers[index] = PushAnswer(
                                result: .transportFailure(
                                    description: error.description,
                                    resendable: error.code == .notProcessed
                                ),
                                latency: latency
                            )
                        }
                    }
                }
            }
            if let unavailableReason { unavailable(round: round, reason: unavailableReason) }
            todo = resend.sorted()
        }
        return answers.map {
            $0 ?? PushAnswer(result: .transportFailure(description: "no answer", resendable: true), latency: .zero)
        }
    }

    /// Drains every connection (a new provider token or certificate must go out on fresh ones).
    public func retireConnections() {
        for entry in pool.values { entry.link.draining.store(true, ordering: .relaxed) }
    }

    /// PINGs idle connections, forgets closed ones and closes retired ones once their streams are answered; call
    /// it periodically.
    public func maintain(idleAfter: Duration = .seconds(60)) {
        prune()
        let now = ContinuousClock.now
        for (id, entry) in pool {
            let inFlight = entry.link.leased.load(ordering: .relaxed)
            if inFlight == 0, entry.link.isOpen, now - entry.lastUsed > idleAfter {
                entry.link.connection.ping()
                pool[id]?.lastUsed = now
            }
        }
    }

    /// A snapshot for inspection: connections with their stream limit, streams in flight and state.
    public func snapshot() -> [(maxStreams: UInt32, inFlight: Int, verified: Bool, open: Bool)] {
        pool.values.map {
            (
                $0.link.maxStreams.load(ordering: .relaxed), $0.link.leased.load(ordering: .relaxed), $0.verified,
                $0.link.isOpen
            )
        }
    }

    /// `goAways` counts every connection lost (GOAWAY or a close) when it happened, not when next asked for.
    public var counters: (sent: Int, connectionsOpened: Int, goAways: Int) {
        (stats.sent, stats.connectionsOpened, losses.load(ordering: .relaxed))
    }

    /// Until when nothing is sent: the service asked for a pause (APNs' 503, FCM's `Retry-After`); nil: no pause.
    public var pausedUntil: ContinuousClock.Instant? { schedule.paused(now: .now) }

    /// Whether the service has been unreachable (failed attempts in a row, since when, the latest error).
    public var reachability: (failures: Int, since: ContinuousClock.Instant?, lastError: String?) {
        (schedule.streak.failures, schedule.streak.since, schedule.streak.lastError)
    }

    public func shutdown() async {
        let links = pool.values.map(\.link)
        pool.removeAll()
        // Together: each close may wait for a peer that does not answer (at most `closeTimeout`).
        await withTaskGroup(of: Void.self) { group in
            for link in links { group.addTask { await link.connection.close() } }
        }
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    /// The `authorization` field's value with a token (`bearer <provider token>`, `Bearer <access token>`); nil
    /// with a certificate.
    func authorization() async throws -> String? {
        switch authentication {
        case .token(let cache): "bearer \(try await cache.token())"
        case .accessToken(let source): "Bearer \(try await source.token())"
        case .certificate: nil
        }
    }

    // MARK: Responses

    /// APNs' answers.
    static func apnsResult(of response: HTTP2Message) -> PushResult {
        guard let status = response.status else {
            return .transportFailure(description: "an answer without :status", resendable: false)
        }
        if status == 200 { return .accepted(apnsID: response["apns-id"] ?? "") }
        // Every dead token's answer is parsed here: APNs' two shapes are read directly, anything else through
        // `JSONDecoder` (which cost 3% of a run with 30% dead tokens).
        let body =
            ErrorBody(apnsShape: response.body.readableBytesView)
            ?? (try? JSONDecoder().decode(ErrorBody.self, from: Data(response.body.readableBytesView)))
        let reason = body?.reason ?? "HTTP \(status)"
        let timestamp = body?.timestamp.map { Date(timeIntervalSince1970: $0 / 1000) }
        return .rejected(status: status, reason: reason, timestamp: timestamp)
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        self = .nanoseconds(Int64(duration / .nanoseconds(1)))
    }
}
