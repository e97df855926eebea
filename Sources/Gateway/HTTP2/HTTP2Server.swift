import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// One request received by an `HTTP2Server`, with the means to answer it from any task.
public struct HTTP2ServerRequest: Sendable {
    public let streamID: Int32
    public let message: HTTP2Message
    public let eventLoop: any EventLoop
    let handler: NIOLoopBound<HTTP2ConnectionHandler>

    /// Answers the request; with no body the answer is a single HEADERS frame with END_STREAM.
    public func respond(status: Int, headers: [HTTP2Header] = [], body: ByteBuffer? = nil) {
        // Straight into a header block: no `:status` string, no second array, no conversion on the event loop.
        var block = HTTP2HeaderBlock(
            byteCapacity: headers.reduce(12) { $0 + $1.name.utf8.count + $1.value.utf8.count },
            fieldCapacity: headers.count + 1
        )
        block.append(":status") { $0.appendDecimal(Int64(status)) }
        for header in headers { block.append(header) }
        handler.respond(streamID: streamID, headers: block, body: body)
    }

    public func reset(errorCode: UInt32) {
        eventLoop.execute { [handler, streamID] in handler.value.resetStream(streamID, errorCode: errorCode) }
    }
}

/// Server-side controls of one accepted connection (for fault injection).
public struct HTTP2ServerConnection: Sendable {
    let handler: NIOLoopBound<HTTP2ConnectionHandler>
    let channel: any Channel

    public func announce(maxConcurrentStreams: UInt32) {
        channel.eventLoop.execute { [handler] in handler.value.announce(maxConcurrentStreams: maxConcurrentStreams) }
    }

    public func goAway(errorCode: UInt32, debugData: String, lastStreamID: Int32? = nil, close: Bool = false) {
        channel.eventLoop.execute { [handler] in
            handler.value.goAway(errorCode: errorCode, debugData: debugData, lastStreamID: lastStreamID, close: close)
        }
    }

    public func drop() {
        channel.close(promise: nil)
    }
}

/// An HTTP/2 server on the libnghttp2 engine: TLS (with or without ALPN, like APNs) or cleartext prior knowledge.
public struct HTTP2Server: Sendable {
    public let channel: any Channel
    public var port: Int { channel.localAddress?.port ?? 0 }

    /// Binds and starts accepting. `onConnection` sees each new connection; `onRequest` each whole request,
    /// on the connection's event loop, and must not block.
    public static func bind(
        host: String,
        port: Int,
        tls: TLSConfiguration?,
        maxConcurrentStreams: UInt32 = 1000,
        maxHeaderListSize: Int = 16 * 1024,
        maximumBodySize: Int = 1 << 20,
        idleTimeout: Duration? = nil,
        connectionLimits: ConnectionLimits? = nil,
        logger: Logger = Logger(label: "http2-server", factory: { _ in SwiftLogNoOpLogHandler() }),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onConnection: @escaping @Sendable (HTTP2ServerConnection) -> Void = { _ in },
        onRequest: @escaping @Sendable (HTTP2ServerRequest, HTTP2ServerConnection) -> Void
    ) async throws -> HTTP2Server {
        let sslContext: NIOSSLContext? = try tls.map { configuration in
            var configuration = configuration
            configuration.applicationProtocols = ["h2"]
            return try NIOSSLContext(configuration: configuration)
        }
        let counter = connectionLimits.map { ConnectionCounter(limits: $0, name: "http2") }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    }
                    if let counter {
                        try channel.pipeline.syncOperations.addHandler(
                            ConnectionGuard(counter: counter, logger: logger)
                        )
                    }
                    let handler = HTTP2ConnectionHandler(
                        configuration: .init(
                            role: .server,
                            maxConcurrentStreams: maxConcurrentStreams,
                            maximumBodySize: maximumBodySize,
                            maxHeaderListSize: maxHeaderListSize
                        )
                    )
                    let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                    let connection = HTTP2ServerConnection(handler: bound, channel: channel)
                    handler.onRequest = { streamID, message, _ in
                        onRequest(
                            HTTP2ServerRequest(
                                streamID: streamID,
                                message: message,
                                eventLoop: channel.eventLoop,
                                handler: bound
                            ),
                            connection
                        )
                    }
                    if let idleTimeout {
                        // Silent connections (no byte in either direction) are closed, from the TCP accept on.
                        let timeout = TimeAmount.nanoseconds(Int64(idleTimeout / .nanoseconds(1)))
                        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: timeout))
                        try channel.pipeline.syncOperations.addHandler(handler)
                        try channel.pipeline.syncOperations.addHandler(IdleCloser())
                    } else {
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                    onConnection(connection)
                }
            }
            .bind(host: host, port: port).get()
        return HTTP2Server(channel: channel)
    }

    public func close() async {
        try? await channel.close()
    }
}
