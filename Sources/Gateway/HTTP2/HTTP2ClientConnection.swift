import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A client HTTP/2 connection on the libnghttp2 engine, usable from any task.
///
/// Every call hops to the connection's event loop, where the handler lives.
public final class HTTP2ClientConnection: Sendable {
    public let channel: any Channel
    private let handler: NIOLoopBound<HTTP2ConnectionHandler>

    private init(channel: any Channel, handler: NIOLoopBound<HTTP2ConnectionHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects over TLS (ALPN `h2`) or, with `tls: nil`, cleartext HTTP/2 with prior knowledge.
    /// `onEvent` runs on the event loop for every engine event (settings, GOAWAY, close).
    public static func connect(
        host: String,
        port: Int,
        tls: TLSConfiguration?,
        serverHostname: String? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        connectTimeout: TimeAmount = .seconds(10),
        onEvent: @escaping @Sendable (HTTP2Event) -> Void = { _ in }
    ) async throws -> HTTP2ClientConnection {
        let sslContext: NIOSSLContext? = try tls.map { configuration in
            var configuration = configuration
            configuration.applicationProtocols = ["h2"]
            // Closing waits this long at most for the peer's close_notify (NIOSSL's default is 5 s): a push service
            // that hangs with its connections open held a stop past its deadline, one connection after another.
            configuration.shutdownTimeout = min(configuration.shutdownTimeout, Self.closeTimeout)
            return try NIOSSLContext(configuration: configuration)
        }
        // Cancelling the caller closes the channel being set up: the connect, the TLS handshake and the wait for
        // SETTINGS all end with it.
        let attempt = ConnectAttempt()
        return try await withTaskCancellationHandler {
            try await connect(
                host: host,
                port: port,
                sslContext: sslContext,
                serverHostname: serverHostname,
                group: group,
                connectTimeout: connectTimeout,
                attempt: attempt,
                onEvent: onEvent
            )
        } onCancel: {
            attempt.cancel()
        }
    }

    private static func connect(
        host: String,
        port: Int,
        sslContext: NIOSSLContext?,
        serverHostname: String?,
        group: any EventLoopGroup,
        connectTimeout: TimeAmount,
        attempt: ConnectAttempt,
        onEvent: @escaping @Sendable (HTTP2Event) -> Void
    ) async throws -> HTTP2ClientConnection {
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard attempt.started(channel) else { throw CancellationError() }
                    if let sslContext {
                        let ssl = try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname ?? host)
                        try channel.pipeline.syncOperations.addHandler(ssl)
                    }
                    let handler = HTTP2ConnectionHandler(configuration: .init(role: .client, maxConcurrentStreams: 100))
                    handler.onEvent = onEvent
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: host, port: port).get()
        // Until the peer's SETTINGS arrive its stream limit is unknown; opening streams blindly gets them refused.
        // The promise is completed on every path (settings, close, timeout, failed lookup): NIO traps on a leak.
        let settings = channel.eventLoop.makePromise(of: Void.self)
        let timeout = channel.eventLoop.scheduleTask(in: connectTimeout) {
            settings.fail(HTTP2EngineError(.connectionClosed, "no SETTINGS from the peer in time"))
        }
        do {
            let handler = try await channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: HTTP2ConnectionHandler.self)
                handler.whenSettingsReceived(promise: settings)
                return NIOLoopBound(handler, eventLoop: channel.eventLoop)
            }.get()
            try await settings.futureResult.get()
            timeout.cancel()
            return HTTP2ClientConnection(channel: channel, handler: handler)
        } catch {
            timeout.cancel()
            settings.fail(error)  // ignored when already completed
            try? await channel.close()
            throw error
        }
    }

    /// Sends one request and waits for the whole response, at most `deadline`.
    public func send(
        _ headers: [HTTP2Header],
        body: ByteBuffer? = nil,
        deadline: TimeAmount
    ) async throws -> HTTP2Message {
        try await send(HTTP2HeaderBlock(headers), body: body, deadline: deadline)
    }

    /// Sends one request and waits for the whole response, at most `deadline`. Cancelling the caller resets the
    /// stream and fails the call with `.cancelled`.
    public func send(
        _ headers: HTTP2HeaderBlock,
        body: ByteBuffer? = nil,
        deadline: TimeAmount
    ) async throws -> HTTP2Message {
        let promise = channel.eventLoop.makePromise(of: HTTP2Message.self)
        let ticket = StreamTicket()
        return try await withTaskCancellationHandler {
            channel.eventLoop.execute { [handler] in
                guard !ticket.isCancelled else {
                    promise.fail(HTTP2EngineError(.cancelled, "the caller was cancelled"))
                    return
                }
                let stream = handler.value.request(headers, body: body, deadline: deadline, promise: promise)
                if let stream, ticket.submitted([stream]) { handler.value.cancel([stream]) }
            }
            return try await promise.futureResult.get()
        } onCancel: { [handler] in
            let streams = ticket.cancel()
            guard !streams.isEmpty else { return }
            handler.eventLoop.execute { handler.value.cancel(streams) }
        }
    }

    /// Sends several requests in one hop to the event loop and one write, and waits for every answer (in order).
    /// A request's failure is its answer; this never throws. `onAnswer` runs on the event loop as each request's
    /// answer (with the response) or failure (nil) comes, with the request's index (so a caller can free what the
    /// request held, or record its outcome, before the slowest one is answered); it is not called for requests
    /// that never reached the connection (then every answer is a failure).
    public func send(
        batch requests: [(headers: HTTP2HeaderBlock, body: ByteBuffer?)],
        deadline: TimeAmount,
        onAnswer: (@Sendable (_ index: Int, _ response: HTTP2Message?) -> Void)? = nil
    ) async -> [HTTP2Answer] {
        let promise = channel.eventLoop.makePromise(of: [HTTP2Answer].self)
        let ticket = StreamTicket()
        do {
            return try await withTaskCancellationHandler {
                channel.eventLoop.execute { [handler] in
                    guard !ticket.isCancelled else {
                        let failure = HTTP2EngineError(.cancelled, "the caller was cancelled")
                        promise.succeed(requests.map { _ in HTTP2Answer(result: .failure(failure), latency: .zero) })
                        return
                    }
                    let streams = handler.value.request(
                        batch: requests,
                        deadline: deadline,
                        onAnswer: onAnswer,
                        promise: promise
                    )
                    if ticket.submitted(streams) { handler.value.cancel(streams) }
                }
                return try await promise.futureResult.get()
            } onCancel: { [handler] in
                let streams = ticket.cancel()
                guard !streams.isEmpty else { return }
                handler.eventLoop.execute { handler.value.cancel(streams) }
            }
        } catch {
            let failure = HTTP2EngineError(.connectionClosed, "\(error)")
            return requests.map { _ in HTTP2Answer(result: .failure(failure), latency: .zero) }
        }
    }

    /// The peer's current SETTINGS_MAX_CONCURRENT_STREAMS and our streams in flight.
    public func streamState() async throws -> (maxConcurrentStreams: UInt32, inFlight: Int, usable: Bool) {
        try await channel.eventLoop.submit { [handler] in
            (handler.value.remoteMaxConcurrentStreams, handler.value.inFlight, handler.value.isUsable)
        }.get()
    }

    /// Bytes in this connection's HPACK encoder table.
    func headerEncoderTableSize() async throws -> Int {
        try await channel.eventLoop.submit { [handler] in handler.value.headerEncoderTableSize }.get()
    }

    public func ping() {
        channel.eventLoop.execute { [handler] in handler.value.ping() }
    }

    public func close() async {
        try? await channel.close()
    }

    /// How long a close waits for the peer's TLS close_notify before the socket is closed anyway.
    static let closeTimeout = TimeAmount.seconds(1)
}

/// The streams of one call, so that cancelling the caller resets them, whether the cancellation comes before or
/// after the event loop opened them.
final class StreamTicket: Sendable {
    private let state = Mutex<(cancelled: Bool, streams: [Int32])>((false, []))

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Records the call's streams (on the event loop); true when the caller was cancelled meanwhile.
    func submitted(_ streams: [Int32]) -> Bool {
        state.withLock {
            $0.streams = streams
            return $0.cancelled
        }
    }

    /// Marks the call cancelled; returns the streams opened so far (they must be reset).
    func cancel() -> [Int32] {
        state.withLock {
            $0.cancelled = true
            return $0.streams
        }
    }
}

/// A connection being set up, so that cancelling the caller closes its channel.
final class ConnectAttempt: Sendable {
    private let state = Mutex<(cancelled: Bool, channel: (any Channel)?)>((false, nil))

    /// Records the new channel; false when the caller was cancelled already (the channel must not be used).
    func started(_ channel: any Channel) -> Bool {
        state.withLock {
            $0.channel = channel
            return !$0.cancelled
        }
    }

    func cancel() {
        let channel = state.withLock {
            $0.cancelled = true
            return $0.channel
        }
        channel?.close(promise: nil)
    }
}
