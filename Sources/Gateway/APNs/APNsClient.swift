import Engine
import Foundation
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// How the broker proves itself to APNs.
public enum APNsAuthentication: Sendable {
    /// Provider token (JWT) shared by every connection of the identity.
    case token(ProviderTokenCache)
    /// TLS client certificate, configured in `APNsClientConfiguration.tls`.
    case certificate
}

/// Configuration of one APNs client (one tenant identity and environment).
public struct APNsClientConfiguration: Sendable {
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
    /// First and largest pause between connection attempts after a failure or GOAWAY (jittered, doubling).
    public var reconnectBackoff: Duration
    public var maximumReconnectBackoff: Duration

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
        maximumReconnectBackoff: Duration = .seconds(30)
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
    }
}

/// Sends pushes to APNs over a pool of HTTP/2 connections on the libnghttp2 engine.
///
/// In-flight streams never exceed what the server allows: a token connection carries one stream until a push
/// succeeds, then follows SETTINGS_MAX_CONCURRENT_STREAMS as it changes. When every connection is full it opens
/// another, up to the limit, then callers wait (bounded). GOAWAY drains a connection; REFUSED_STREAM and
/// streams above a GOAWAY are resent; reconnects back off with jitter.
public actor APNsClient {
    /// A connection's state that its event loop updates (GOAWAY, close) and the pool reads.
    final class Link: Sendable {
        let connection: HTTP2ClientConnection
        let draining = Atomic<Bool>(false)
        let maxStreams = Atomic<UInt32>(1)
        /// Streams leased and not yet answered: the pool adds what it leases, and each answer gives its stream
        /// back at once on the event loop, not when the slowest answer of its batch comes.
        let leased = Atomic<Int>(0)
        init(connection: HTTP2ClientConnection) { self.connection = connection }
        var isOpen: Bool { !draining.load(ordering: .relaxed) && connection.channel.isActive }
    }

    struct Pooled {
        let link: Link
        var verified: Bool
        var lastUsed = ContinuousClock.now
        /// Whether its GOAWAY or close has been counted towards the reconnect backoff.
        var lossCounted = false
    }

    public nonisolated let configuration: APNsClientConfiguration
    let authentication: APNsAuthentication
    private let logger: Logger
    private var pool: [ObjectIdentifier: Pooled] = [:]
    private var connecting = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// Set by a caller about to wait for a stream; the event loop that gives a stream back clears it and wakes
    /// the waiters (one hop per wait, not one per answer).
    private nonisolated let streamWanted = Atomic<Bool>(false)
    private var failures = 0
    private var nextConnectAt = ContinuousClock.now
    private var stats = (sent: 0, connectionsOpened: 0, goAways: 0)

    public init(configuration: APNsClientConfiguration, authentication: APNsAuthentication, logger: Logger) {
        self.configuration = configuration
        self.authentication = authentication
        self.logger = logger
    }

    /// Sends one push; never throws: every failure is a `PushResult` the outcome policy understands.
    public func send(_ notification: APNsNotification) async -> PushResult {
        let headers: HTTP2HeaderBlock
        do {
            headers = notification.headerBlock(authority: configuration.host, authorization: try authorization())
        } catch {
            return .transportFailure(description: "cannot sign a provider token", resendable: true)
        }
        let body = ByteBuffer(bytes: notification.payload)
        var attempt = 0
        while true {
            attempt += 1
            let lease: Link
            switch await acquire(upTo: 1) {
            case .success(let leased): lease = leased.link
            case .failure(let reason): return .transportFailure(description: reason.description, resendable: true)
            }
            do {
                let response = try await lease.connection.send(
                    headers,
                    body: body,
                    deadline: TimeAmount(configuration.requestDeadline)
                )
                giveBack(lease, streams: 1)
                settle(lease, accepted: response.status == 200)
                stats.sent += 1
                return Self.result(of: response)
            } catch let error as HTTP2EngineError {
                giveBack(lease, streams: 1)
                settle(lease, accepted: false)
                // Not processed by APNs (REFUSED_STREAM, above a GOAWAY): resend at once, at most twice.
                if error.code == .notProcessed, attempt < 3 { continue }
                return .transportFailure(description: error.description, resendable: error.code == .notProcessed)
            } catch {
                giveBack(lease, streams: 1)
                settle(lease, accepted: false)
                return .transportFailure(description: "\(error)", resendable: false)
            }
        }
    }

    /// Sends several pushes with as few hops as possible: streams are leased in chunks, each chunk goes to its
    /// connection's event loop in one hop and one write. Answers come in the order given; like `send`, every
    /// failure is a `PushResult`. Streams not processed by APNs (REFUSED_STREAM, above a GOAWAY) are resent, at
    /// most twice.
    ///
    /// Each answer gives its stream back as it comes, so a slow answer holds one stream, not its whole chunk's;
    /// `onAnswer` runs then too (on the event loop), for every answer that came over a connection.
    public func send(
        batch notifications: [APNsNotification],
        onAnswer: (@Sendable () -> Void)? = nil
    ) async -> [PushAnswer] {
        let authorization: String?
        do {
            authorization = try self.authorization()
        } catch {
            let failure = PushResult.transportFailure(description: "cannot sign a provider token", resendable: true)
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
        var answers = [PushAnswer?](repeating: nil, count: notifications.count)
        var todo = Array(notifications.indices)
        var attempt = 0
        while !todo.isEmpty {
            attempt += 1
            var resend: [Int] = []
            await withTaskGroup(of: (indices: [Int], answers: [HTTP2Answer]).self) { group in
                var rest = todo[...]
                while !rest.isEmpty {
                    switch await acquire(upTo: rest.count) {
                    case .success(let lease):
                        let indices = Array(rest.prefix(lease.granted))
                        rest = rest.dropFirst(lease.granted)
                        let chunk = indices.map { requests[$0] }
                        group.addTask {
                            // Each stream is given back exactly once: by its answer, or after the chunk when no
                            // answer came for it (a connection that never took the requests).
                            let held = HeldPlaces(indices.count)
                            let answers = await lease.link.connection.send(batch: chunk, deadline: deadline) {
                                if held.take(1) > 0 { self.giveBack(lease.link, streams: 1) }
                                onAnswer?()
                            }
                            let unanswered = held.takeAll()
                            if unanswered > 0 { self.giveBack(lease.link, streams: unanswered) }
                            await self.settle(
                                lease.link,
                                accepted: answers.contains { (try? $0.result.get())?.status == 200 }
                            )
                            return (indices, answers)
                        }
                    case .failure(let reason):
                        let failure = PushResult.transportFailure(description: reason.description, resendable: true)
                        for index in rest { answers[index] = PushAnswer(result: failure, latency: .zero) }
                        rest = rest[rest.endIndex...]
                    }
                }
                for await chunk in group {
                    for (index, answer) in zip(chunk.indices, chunk.answers) {
                        let latency = Duration.nanoseconds(answer.latency.nanoseconds)
                        switch answer.result {
                        case .success(let response):
                            stats.sent += 1
                            answers[index] = PushAnswer(result: Self.result(of: response), latency: latency)
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

    /// PINGs idle connections and forgets closed ones; call it periodically.
    public func maintain(idleAfter: Duration = .seconds(60)) {
        let now = ContinuousClock.now
        for (id, entry) in pool {
            let inFlight = entry.link.leased.load(ordering: .relaxed)
            if !entry.link.connection.channel.isActive, inFlight == 0 {
                pool[id] = nil
            } else if inFlight == 0, now - entry.lastUsed > idleAfter {
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

    public var counters: (sent: Int, connectionsOpened: Int, goAways: Int) { stats }

    public func shutdown() async {
        let links = pool.values.map(\.link)
        pool.removeAll()
        for link in links { await link.connection.close() }
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }

    // MARK: Pool

    private func limit(_ entry: Pooled) -> Int {
        if case .token = authentication, !entry.verified { return 1 }
        return Int(max(1, entry.link.maxStreams.load(ordering: .relaxed)))
    }

    /// A connection with a free stream, opening one or waiting as needed. Fails at once when APNs cannot be
    /// reached (the caller's retry policy backs off), never loops on connection attempts.
    private func acquire(upTo wanted: Int) async -> Result<(link: Link, granted: Int), AcquireFailure> {
        // Whether `streamWanted` was raised since the last look: then one more look, and only then a wait.
        var announced = false
        while !Task.isCancelled {
            // Only this actor adds to `leased`; answers only take away, so a stream seen free stays free.
            if let (id, entry) = pool.first(where: { $0.value.link.isOpen && free($0.value) > 0 }) {
                let granted = min(wanted, free(entry))
                entry.link.leased.add(granted, ordering: .sequentiallyConsistent)
                pool[id]?.lastUsed = .now
                return .success((entry.link, granted))
            }
            noteLostConnections()
            pool = pool.filter { $0.value.link.isOpen || $0.value.link.leased.load(ordering: .relaxed) > 0 }
            let open = pool.values.filter { $0.link.isOpen }.count
            if open + connecting < configuration.maximumConnections, ContinuousClock.now >= nextConnectAt {
                if let failure = await connect() { return .failure(failure) }
                continue
            }
            if open + connecting == 0 {
                // Reconnecting after a GOAWAY or a failed connect: wait out a short backoff, fail a long one.
                guard nextConnectAt - .now <= configuration.requestDeadline else {
                    return .failure(AcquireFailure("APNs is unreachable; reconnecting after a backoff"))
                }
                do {
                    try await Task.sleep(until: nextConnectAt, clock: .continuous)
                } catch {
                    return .failure(AcquireFailure("cancelled"))
                }
                continue
            }
            guard waiters.count < configuration.maximumWaiting else {
                return .failure(AcquireFailure("too many pushes waiting for an APNs stream"))
            }
            // Raised before the last look: an answer after that look sees it and wakes the waiters.
            if !announced {
                streamWanted.store(true, ordering: .sequentiallyConsistent)
                announced = true
                continue
            }
            announced = false
            // Woken by an answer, a verified or newly opened connection, a failed connect, or the caller's
            // cancellation (then all wake and re-check).
            await withTaskCancellationHandler {
                await withCheckedContinuation { waiters.append($0) }
            } onCancel: {
                Task { await self.wakeWaiters() }
            }
        }
        return .failure(AcquireFailure("cancelled"))
    }

    struct AcquireFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A connection lost to GOAWAY or a close delays the next connect (jittered, doubling while no push
    /// succeeds), so a server that keeps sending GOAWAY never sees a rapid reconnect loop.
    private func noteLostConnections() {
        for (id, entry) in pool where !entry.link.isOpen && !entry.lossCounted {
            pool[id]?.lossCounted = true
            stats.goAways += 1
            failures += 1
            let pause = min(
                configuration.reconnectBackoff * (1 << min(failures - 1, 16)),
                configuration.maximumReconnectBackoff
            )
            nextConnectAt = max(nextConnectAt, .now + pause * Double.random(in: 0.5...1.5))
        }
    }

    private func free(_ entry: Pooled) -> Int {
        limit(entry) - entry.link.leased.load(ordering: .sequentiallyConsistent)
    }

    /// Gives streams back (on the event loop as answers come, or after a chunk); wakes the waiters when a caller
    /// announced it waits.
    private nonisolated func giveBack(_ link: Link, streams: Int) {
        link.leased.subtract(streams, ordering: .sequentiallyConsistent)
        if streamWanted.exchange(false, ordering: .sequentiallyConsistent) {
            Task { await self.wakeWaiters() }
        }
    }

    /// After a chunk or a push: an accepted push verifies its connection (a token connection's limit then
    /// follows the server's) and ends the reconnect backoff.
    private func settle(_ link: Link, accepted: Bool) {
        guard accepted else { return }
        let id = ObjectIdentifier(link)
        let wasVerified = pool[id]?.verified ?? true
        pool[id]?.verified = true
        failures = 0
        if !wasVerified { wakeWaiters() }
    }

    private func wakeWaiters() {
        let woken = waiters
        waiters.removeAll()
        for waiter in woken { waiter.resume() }
    }

    /// Opens one connection; returns why it could not.
    private func connect() async -> AcquireFailure? {
        connecting += 1
        defer { connecting -= 1 }
        do {
            let box = Mutex<Link?>(nil)
            let connection = try await HTTP2ClientConnection.connect(
                host: configuration.host,
                port: configuration.port,
                tls: configuration.tls,
                serverHostname: configuration.serverHostname ?? configuration.host,
                connectTimeout: TimeAmount(configuration.connectTimeout)
            ) { event in
                guard let link = box.withLock({ $0 }) else { return }
                switch event {
                case .remoteSettings(let streams): link.maxStreams.store(streams, ordering: .relaxed)
                case .goAway, .connectionClosed: link.draining.store(true, ordering: .relaxed)
                default: break
                }
            }
            let link = Link(connection: connection)
            box.withLock { $0 = link }
            let (streams, _, usable) = try await connection.streamState()
            link.maxStreams.store(streams, ordering: .relaxed)
            if !usable { link.draining.store(true, ordering: .relaxed) }
            let certificate: Bool = if case .certificate = authentication { true } else { false }
            pool[ObjectIdentifier(link)] = Pooled(link: link, verified: certificate)
            stats.connectionsOpened += 1
            // Callers that waited while it was opening may take its streams now.
            wakeWaiters()
            logger.debug(
                "APNs connection opened",
                metadata: ["apns.host": "\(configuration.host)", "apns.streams": "\(streams)"]
            )
            return nil
        } catch {
            failures += 1
            let pause = min(
                configuration.reconnectBackoff * (1 << min(failures - 1, 16)),
                configuration.maximumReconnectBackoff
            )
            nextConnectAt = .now + pause * Double.random(in: 0.5...1.5)
            // Callers waiting for this connection would otherwise wait for a push that never comes.
            wakeWaiters()
            logger.warning(
                "cannot connect to APNs; backing off",
                metadata: [
                    "apns.host": "\(configuration.host)", "apns.backoff_ms": "\(pause.components.seconds * 1000)",
                ]
            )
            return AcquireFailure("cannot connect to APNs: \(error)")
        }
    }

    /// The `authorization` field's value with token auth (`bearer <provider token>`); nil with a certificate.
    private func authorization() throws -> String? {
        guard case .token(let cache) = authentication else { return nil }
        return "bearer \(try cache.token())"
    }

    // MARK: Responses

    static func result(of response: HTTP2Message) -> PushResult {
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
