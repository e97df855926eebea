import NIOCore
import NIOPosix
import NIOSSL

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
            return try NIOSSLContext(configuration: configuration)
        }
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
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

    /// Sends one request and waits for the whole response, at most `deadline`.
    public func send(
        _ headers: HTTP2HeaderBlock,
        body: ByteBuffer? = nil,
        deadline: TimeAmount
    ) async throws -> HTTP2Message {
        let promise = channel.eventLoop.makePromise(of: HTTP2Message.self)
        channel.eventLoop.execute { [handler] in
            handler.value.request(headers, body: body, deadline: deadline, promise: promise)
        }
        return try await promise.futureResult.get()
    }

    /// Sends several requests in one hop to the event loop and one write, and waits for every answer (in order).
    /// A request's failure is its answer; this never throws. `onAnswer` runs on the event loop as each request's
    /// answer or failure comes (so a caller can free what the request held before the slowest one is answered);
    /// it is not called for requests that never reached the connection (then every answer is a failure).
    public func send(
        batch requests: [(headers: HTTP2HeaderBlock, body: ByteBuffer?)],
        deadline: TimeAmount,
        onAnswer: (@Sendable () -> Void)? = nil
    ) async -> [HTTP2Answer] {
        let promise = channel.eventLoop.makePromise(of: [HTTP2Answer].self)
        channel.eventLoop.execute { [handler] in
            handler.value.request(batch: requests, deadline: deadline, onAnswer: onAnswer, promise: promise)
        }
        do {
            return try await promise.futureResult.get()
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
}
