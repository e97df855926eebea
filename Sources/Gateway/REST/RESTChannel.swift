import Engine
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import ServiceLifecycle
import Synchronization

/// The REST listener's connections: TLS with ALPN. `h2` runs on the libnghttp2 engine (one handler per connection,
/// no channel or task pipeline per stream) and answers each request through the router; HTTP/1.1, or a client
/// that offers no ALPN, runs on Hummingbird's HTTP/1 channel.
///
/// Hummingbird's own HTTP/2 (swift-nio-http2 with a child channel per stream) cost about thirty times what
/// libnghttp2 costs per request on this machine; the routes, middleware and problem answers are the same either
/// way, because both paths go through the same router.
struct RESTChannel: ServerChildChannel {
    enum Negotiated: Sendable {
        case http1(HTTP1Channel.Value)
        case http2(any Channel)
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    /// The certificate and key, reloadable: each connection takes the context current when it is accepted.
    let tls: ServerTLS
    let http1: HTTP1Channel
    let router: RouterResponder<BrokerRequestContext>
    let idleTimeout: Duration
    /// After GOAWAY, how long streams in progress may take before the connection is closed anyway.
    let gracefulCloseTimeout: Duration
    let maxConcurrentStreams: UInt32
    let maximumBodySize: Int
    /// Requests whose body the routes read as it arrives (user imports), and how large it may be.
    let streamsBody: (@Sendable (String) -> Bool)?
    let streamedBodySize: Int
    /// The header list limit HTTP/1.1 enforces too, in HPACK's measure (name + value + 32 per field).
    let maxHeaderListSize: Int
    /// The listener's connections: at most so many, each with a deadline for its handshake and first request.
    let connections: ConnectionCounter
    /// Requests in progress (node-wide); HTTP/2 requests are admitted or refused here, before they become tasks,
    /// and its governor lowers every connection's stream limit while it is full.
    let admission: AdmissionControl?
    /// Load balancers: exempt from the per-address connection limit, and, with `proxyProtocol`, the peers whose
    /// PROXY header names the client.
    let trustedProxies: [NetworkRange]
    let proxyProtocol: Bool

    init(
        tls: ServerTLS,
        http1: HTTP1Channel,
        router: RouterResponder<BrokerRequestContext>,
        idleTimeout: Duration,
        gracefulCloseTimeout: Duration = .seconds(10),
        maxConcurrentStreams: UInt32 = 100,
        maximumBodySize: Int = 1 << 20,
        streamsBody: (@Sendable (String) -> Bool)? = nil,
        streamedBodySize: Int = 64 << 20,
        maxHeaderListSize: Int = 16 * 1024,
        connectionLimits: ConnectionLimits = ConnectionLimits(),
        admission: AdmissionControl? = nil,
        trustedProxies: [NetworkRange] = [],
        proxyProtocol: Bool = false
    ) throws {
        self.tls = tls
        self.http1 = http1
        self.router = router
        self.idleTimeout = idleTimeout
        self.gracefulCloseTimeout = gracefulCloseTimeout
        self.maxConcurrentStreams = maxConcurrentStreams
        self.maximumBodySize = maximumBodySize
        self.streamsBody = streamsBody
        self.streamedBodySize = streamedBodySize
        self.maxHeaderListSize = maxHeaderListSize
        self.connections = ConnectionCounter(limits: connectionLimits, name: "https")
        self.admission = admission
        self.trustedProxies = trustedProxies
        self.proxyProtocol = proxyProtocol
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            if proxyProtocol {
                try channel.pipeline.syncOperations.addHandler(
                    ProxyProtocolHandler(trustedProxies: trustedProxies, logger: logger)
                )
            }
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls.context))
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(counter: connections, trustedProxies: trustedProxies, logger: logger)
            )
            let negotiation = NIOTypedApplicationProtocolNegotiationHandler<Negotiated> { result, channel in
                switch result {
                case .negotiated("h2"):
                    return channel.eventLoop.makeCompletedFuture {
                        try configureHTTP2(channel, logger: logger)
                        return .http2(channel)
                    }
                case .negotiated("http/1.1"), .fallback:
                    return http1.setup(channel: channel, logger: logger).map { .http1($0) }
                case .negotiated(let other):
                    logger.notice(
                        "closing a connection that negotiated an unknown protocol",
                        metadata: ["alpn": "\(other)"]
                    )
                    return channel.close().flatMapThrowing { throw ChannelError.inappropriateOperationForState }
                }
            }
            try channel.pipeline.syncOperations.addHandler(negotiation)
            return Value(negotiated: negotiation.protocolNegotiationResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        do {
            // A future does not end when its task is cancelled: a connection still in its TLS handshake when the
            // server is cancelled is closed, which fails the negotiation, or the server would wait for it forever.
            let negotiated = try await withTaskCancellationHandler {
                try await value.negotiated.get()
            } onCancel: {
                value.channel.close(promise: nil)
            }
            switch negotiated {
            case .http1(let connection):
                await http1.handle(value: connection, logger: logger)
            case .http2(let channel):
                // Graceful shutdown: GOAWAY, the streams in progress finish, then the engine closes the connection.
                await withGracefulShutdownHandler {
                    await withTaskCancellationHandler {
                        try? await channel.closeFuture.get()
                    } onCancel: {
                        channel.close(promise: nil)
                    }
                } onGracefulShutdown: {
                    let timeout = TimeAmount.nanoseconds(Int64(gracefulCloseTimeout / .nanoseconds(1)))
                    channel.eventLoop.execute {
                        let handler = try? channel.pipeline.syncOperations.handler(type: HTTP2ConnectionHandler.self)
                        handler?.goAway(errorCode: HTTP2ErrorCode.noError, debugData: "shutting down", close: false)
                        channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                    }
                }
            }
        } catch {
            logger.debug("connection ended before its protocol was settled", metadata: ["error": "\(error)"])
        }
    }

    private func configureHTTP2(_ channel: any Channel, logger: Logger) throws {
        let handler = HTTP2ConnectionHandler(
            configuration: .init(
                role: .server,
                maxConcurrentStreams: maxConcurrentStreams,
                maximumBodySize: maximumBodySize,
                maxHeaderListSize: maxHeaderListSize,
                stallTimeout: ConnectionGuard.timeAmount(connections.limits.stallTimeout),
                streamsBody: streamsBody,
                streamedBodySize: streamedBodySize
            )
        )
        let bound = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        let router = router
        let admission = admission
        let limit = maxHeaderListSize
        let executor = EventLoopTaskExecutor(channel.eventLoop)
        let work = NIOLoopBound(StreamWork(limit: Int(maxConcurrentStreams)), eventLoop: channel.eventLoop)
        handler.onEvent = { event in
            switch event {
            case .streamClosed(let streamID, _):
                // A stream the client reset (or that closed before its answer) takes its request's work with it.
                work.value.streamClosed(streamID)
            case .connectionClosed:
                // A dropped connection (a laptop lid, flaky Wi-Fi) ends every upload on it at once: its work sees
                // the body fail, removes its partial file and gives back its admission slot.
                work.value.connectionClosed()
            case .requestBodyPart(let streamID, let part):
                if work.value.bodies[streamID]?.yield(part) == .stopProducing {
                    bound.value.pauseReading(streamID: streamID)
                }
            case .requestBodyEnd(let streamID, let tooLarge):
                let source = work.value.bodies.removeValue(forKey: streamID)
                if tooLarge {
                    source?.finish(
                        Problem(
                            .contentTooLarge,
                            "body-too-large",
                            "the request body is larger than this server accepts"
                        )
                    )
                } else {
                    source?.finish()
                }
            default: break
            }
        }
        handler.onRequest = { streamID, message, handler in
            // A request's work counts against the stream limit until its task ends, not until its stream closes:
            // resetting streams does not buy a client more work than the limit (rapid reset).
            guard work.value.hasRoom else {
                handler.resetStream(streamID, errorCode: HTTP2ErrorCode.refusedStream)
                return
            }
            var tenant: String?
            if let admission, let path = message[":path"] {
                let verdict = admission.admitOrRefuse(path: path)
                if let refusal = verdict.refusal {
                    handler.respond(
                        streamID: streamID,
                        headers: HTTP2HeaderBlock([
                            HTTP2Header(":status", refusal.status),
                            HTTP2Header("content-type", "application/problem+json"),
                            HTTP2Header("cache-control", "no-store"), HTTP2Header("retry-after", "1"),
                        ]),
                        body: refusal.body
                    )
                    return
                }
                tenant = verdict.tenant
            }
            // A streamed body is read by the route as it arrives; while the route lags, the connection is not read.
            var body: RequestBody?
            if message.streamedBody {
                let produced = StreamedBody.Producer.makeSequence(
                    backPressureStrategy: .init(lowWatermark: 2, highWatermark: 8),
                    finishOnDeinit: false,
                    delegate: StreamedBody(handler: bound, streamID: streamID)
                )
                work.value.bodies[streamID] = produced.source
                body = RequestBody(asyncSequence: produced.sequence)
            }
            // Each request runs as its own task, on the connection's event loop thread (and so does the actor code
            // it calls, unless the actor is busy elsewhere): no thread hop to start it or to answer.
            let task = Task(executorPreference: executor) {
                await Self.answer(
                    message,
                    body: body,
                    streamID: streamID,
                    handler: bound,
                    router: router,
                    channel: channel,
                    maxHeaderListSize: limit,
                    admitted: tenant != nil,
                    executor: executor,
                    logger: logger
                )
                if let tenant { admission?.release(tenant: tenant) }
                // A body still arriving after the answer is read by nobody: it ends here (the engine resets the
                // stream once the answer is out).
                work.finished(streamID, abandoningBody: message.streamedBody)
            }
            work.value.started(streamID, task)
        }
        let timeout = TimeAmount.nanoseconds(Int64(idleTimeout / .nanoseconds(1)))
        try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: timeout))
        try channel.pipeline.syncOperations.addHandler(handler)
        // A connection waiting for its requests' answers (a long import) is not idle.
        try channel.pipeline.syncOperations.addHandler(IdleCloser(busy: { work.value.running > 0 }))
        if let governor = admission?.governor {
            let id = ObjectIdentifier(channel)
            let limit = governor.register(bound, id: id)
            if limit != maxConcurrentStreams { handler.announce(maxConcurrentStreams: limit) }
            channel.closeFuture.whenComplete { _ in governor.unregister(id) }
        }
    }

    /// One request through the router, as Hummingbird's application does it (a router error becomes its response,
    /// anything else a 500), and its answer written to the stream: small bodies in one piece, larger ones as the
    /// client's flow-control window lets them go (`HTTP2BodyWriter`).
    static func answer(
        _ message: HTTP2Message,
        body: RequestBody? = nil,
        streamID: Int32,
        handler: NIOLoopBound<HTTP2ConnectionHandler>,
        router: RouterResponder<BrokerRequestContext>,
        channel: any Channel,
        maxHeaderListSize: Int,
        admitted: Bool = false,
        executor: (any TaskExecutor)? = nil,
        logger: Logger
    ) async {
        // A header block without :method or :path: answered as a problem for the root, it names no resource.
        let parsed = Self.request(from: message)
        let head = parsed ?? HTTPRequest(method: .get, scheme: "https", authority: nil, path: "/")
        let request = Request(head: head, body: body ?? RequestBody(buffer: message.body))
        var context = BrokerRequestContext(source: .init(channel: channel, logger: logger))
        context.admitted = admitted
        context.executor = executor
        context.http2 = true
        var response: Response
        do {
            let headerListSize = message.headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 32 }
            if message.headersTooLarge || headerListSize > maxHeaderListSize {
                throw Problem(
                    .init(code: 431, reasonPhrase: "Request Header Fields Too Large"),
                    "headers-too-large",
                    "the request's header list is larger than \(maxHeaderListSize) bytes"
                )
            } else if parsed == nil {
                throw Problem.badRequest(
                    "the request's header block is incomplete or invalid",
                    code: "malformed-request"
                )
            } else if message.bodyTooLarge {
                throw Problem(.contentTooLarge, "body-too-large", "the request body is larger than this server accepts")
            }
            response = try await router.respond(to: request, context: context)
        } catch let problem as Problem {
            response = (try? problem.response(from: request, context: context)) ?? Response(status: problem.status)
        } catch {
            logger.debug("unrecognised error", metadata: ["error": "\(error)"])
            response = Response(status: .internalServerError)
        }
        var headers = [HTTP2Header(":status", String(response.status.code))]
        headers.reserveCapacity(response.headers.count + 2)
        for field in response.headers {
            // Connection-specific fields are forbidden in HTTP/2 (RFC 9113, section 8.2.2).
            switch field.name {
            case .connection, .transferEncoding, .contentLength: continue
            default: headers.append(HTTP2Header(field.name.canonicalName, field.value))
            }
        }
        if response.headers[.date] == nil { headers.append(HTTP2Header("date", HTTPDate.format(Date()))) }
        let writer = HTTP2BodyWriter(
            handler: handler,
            streamID: streamID,
            head: headers,
            statedLength: response.headers[.contentLength],
            sendsBody: head.method != .head
        )
        do {
            try await response.body.write(writer)
        } catch {
            if writer.progress.started {
                // Part of the answer is out: the stream can only be cut short (or it is gone already).
                logger.debug("a streamed answer ended early", metadata: ["error": "\(error)"])
                handler.reset(streamID: streamID, errorCode: HTTP2ErrorCode.internalError)
            } else {
                logger.error(
                    "cannot produce a response body",
                    metadata: ["http.path": "\(head.path ?? "")", "error": "\(error)"]
                )
                handler.respond(
                    streamID: streamID,
                    headers: HTTP2HeaderBlock([HTTP2Header(":status", "500"), HTTP2Header("content-length", "0")]),
                    body: nil
                )
            }
        }
    }

    /// The request head from the HTTP/2 header block; nil when a pseudo-header is missing or a field is invalid.
    static func request(from message: HTTP2Message) -> HTTPRequest? {
        var method: HTTPRequest.Method?
        var scheme: String?
        var authority: String?
        var path: String?
        var fields = HTTPFields()
        fields.reserveCapacity(message.headers.count)
        for header in message.headers {
            switch header.name {
            case ":method": method = HTTPRequest.Method(header.value)
            case ":scheme": scheme = header.value
            case ":authority": authority = header.value
            case ":path": path = header.value
            default:
                guard !header.name.hasPrefix(":"), let name = HTTPField.Name(header.name) else { return nil }
                fields.append(HTTPField(name: name, value: header.value))
            }
        }
        guard let method, let path else { return nil }
        return HTTPRequest(method: method, scheme: scheme, authority: authority, path: path, headerFields: fields)
    }
}
