import CNGHTTP2
import NIOCore
import NIOPosix

/// Drives one `NGHTTP2Session` from a SwiftNIO channel: one handler per connection, no child channel per stream.
///
/// Client side, it matches responses to waiting promises by stream id and enforces deadlines; server side, it
/// hands each complete request to `onRequest`. Everything runs on the channel's event loop.
final class HTTP2ConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Configuration {
        var role: NGHTTP2Session.Role
        /// SETTINGS_MAX_CONCURRENT_STREAMS we announce (servers) — the peer may open at most this many streams.
        var maxConcurrentStreams: UInt32 = 1000
        var initialWindowSize: UInt32 = 1 << 20
        var maximumBodySize = 1 << 20
        /// The header list a peer may send (announced as SETTINGS_MAX_HEADER_LIST_SIZE, enforced as it is decoded).
        var maxHeaderListSize = 16 * 1024
        /// Streaming answers: a writer waits while its stream has this much queued, or the connection `connectionBuffer`.
        var streamBuffer = 256 * 1024
        var connectionBuffer = 1 << 20
        /// A connection with answers queued that the peer has let none of go out for this long is closed.
        var stallTimeout: TimeAmount = .seconds(30)
        /// Requests whose body is handed up in parts (see `NGHTTP2Session.Limits`).
        var streamsBody: (@Sendable (String) -> Bool)?
        var streamedBodySize = 64 << 20
    }

    private let configuration: Configuration
    private var session: NGHTTP2Session?
    private var context: ChannelHandlerContext?
    /// Client side: who waits for each open stream's answer (or failure).
    private var pending: [Int32: Waiter] = [:]
    /// Set while a read is being processed: writes wait for `channelReadComplete`, one flush per read burst.
    private var reading = false
    private var flushScheduled = false
    private var goingAway = false
    private var settingsReceived: EventLoopPromise<Void>?
    /// Server side: writers of streaming answers waiting for room in their stream's or the connection's buffer.
    private var roomWaiters: [Int32: EventLoopPromise<Void>] = [:]
    private var stallCheck: Scheduled<Void>?
    /// The channel's event loop, kept after the handler leaves the pipeline (late writers are failed on it).
    private var eventLoop: (any EventLoop)?
    /// Server side: receives each request with a way to answer it (on this event loop).
    var onRequest: ((Int32, HTTP2Message, HTTP2ConnectionHandler) -> Void)?
    /// Every event, for owners that track settings, GOAWAY and closes.
    var onEvent: ((HTTP2Event) -> Void)?

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: Channel events

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.eventLoop = context.eventLoop
        if context.channel.isActive { start(context: context) }
    }

    /// The context is held only while the handler is in the pipeline: the context holds the handler, so keeping
    /// it after removal would be a cycle that leaks both (seen under LeakSanitizer).
    func handlerRemoved(context: ChannelHandlerContext) {
        failAll(HTTP2EngineError(.connectionClosed, "the connection closed"))
        stallCheck?.cancel()
        stallCheck = nil
        self.context = nil
        session = nil
        onEvent = nil
        onRequest = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard session == nil else { return }
        do {
            session = try NGHTTP2Session(
                role: configuration.role,
                settings: [
                    (NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams),
                    (NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, configuration.initialWindowSize),
                    (NGHTTP2_SETTINGS_ENABLE_PUSH, 0),
                ],
                limits: .init(
                    maxHeaderListSize: configuration.maxHeaderListSize,
                    maximumBodySize: configuration.maximumBodySize,
                    streamsBody: configuration.streamsBody,
                    streamedBodySize: configuration.streamedBodySize
                )
            )
            flush()
        } catch {
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let session else { return }
        reading = true
        do {
            dispatch(try session.receive(unwrapInboundIn(data)))
        } catch {
            reading = false
            failAll(HTTP2EngineError(.session, errorCode: HTTP2ErrorCode.protocolError, "\(error)"))
            context.close(promise: nil)
        }
    }

    /// One write for everything the reads of this burst produced (answers, WINDOW_UPDATEs, SETTINGS ACKs).
    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        flush()
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(HTTP2EngineError(.connectionClosed, "the connection closed"))
        stallCheck?.cancel()
        stallCheck = nil
        onEvent?(.connectionClosed)
        // The session goes (nghttp2_session_del) and the closures go: they may hold this handler, a cycle.
        session = nil
        onEvent = nil
        onRequest = nil
        context.fireChannelInactive()
    }

    /// The peer closed its side (TCP FIN or TLS close_notify; Hummingbird's listener allows half-closed
    /// connections, so that arrives as an event, not as a close). HTTP/2 has no half-closed connection: the
    /// connection closes, and with it every stream still receiving, instead of waiting for an idle timeout that
    /// a stream's pending work defers.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(HTTP2EngineError(.connectionClosed, "\(error)"))
        context.close(promise: nil)
    }

    // MARK: Client

    /// Sends a request; the promise completes with the response, or fails on reset, deadline or close. Returns
    /// its stream (nil when it failed at once).
    @discardableResult
    func request(
        _ headers: HTTP2HeaderBlock,
        body: ByteBuffer?,
        deadline: TimeAmount,
        promise: EventLoopPromise<HTTP2Message>
    ) -> Int32? {
        guard let session, let context, !goingAway else {
            promise.fail(HTTP2EngineError(.notProcessed, "the connection is closing"))
            return nil
        }
        do {
            let streamID = try session.submitRequest(headers: headers, body: body)
            let timer: Scheduled<Void> = context.eventLoop.assumeIsolated().scheduleTask(in: deadline) { [weak self] in
                guard let self else { return }
                self.expire([streamID])
            }
            pending[streamID] = .single(promise, deadline: timer)
            flush()
            return streamID
        } catch {
            promise.fail(error)
            return nil
        }
    }

    /// Sends several requests with one write and one deadline timer; the promise completes when every one has
    /// its answer or failure, in the order given, each with the time from submission to its answer. `onAnswer`
    /// runs for each request as its answer or failure comes, before the promise completes. Returns the streams
    /// it opened.
    @discardableResult
    func request(
        batch requests: [(headers: HTTP2HeaderBlock, body: ByteBuffer?)],
        deadline: TimeAmount,
        onAnswer: ((Int, HTTP2Message?) -> Void)? = nil,
        promise: EventLoopPromise<[HTTP2Answer]>
    ) -> [Int32] {
        guard let session, let context, !goingAway else {
            let failure = HTTP2EngineError(.notProcessed, "the connection is closing")
            promise.succeed(requests.map { _ in HTTP2Answer(result: .failure(failure), latency: .zero) })
            return []
        }
        let batch = BatchAnswers(count: requests.count, onAnswer: onAnswer, promise: promise)
        var streams: [Int32] = []
        streams.reserveCapacity(requests.count)
        // By position: iterating the requests copied each one's header block and body (three retains and
        // releases per request).
        for index in requests.indices {
            do {
                let streamID = try session.submitRequest(headers: requests[index].headers, body: requests[index].body)
                streams.append(streamID)
                pending[streamID] = .batch(batch, index: index)
            } catch {
                batch.complete(index, .failure(error as? HTTP2EngineError ?? HTTP2EngineError(.session, "\(error)")))
            }
        }
        if batch.remaining > 0 {
            batch.timer = context.eventLoop.assumeIsolated().scheduleTask(in: deadline) { [weak self] in
                self?.expire(streams)
            }
        }
        flush()
        return streams
    }

    private func expire(_ streamIDs: [Int32]) {
        abandon(
            streamIDs,
            HTTP2EngineError(.deadlineExceeded, errorCode: HTTP2ErrorCode.cancel, "no answer before the deadline")
        )
    }

    /// Resets streams whose caller was cancelled; their waiters fail with `.cancelled`.
    func cancel(_ streamIDs: [Int32]) {
        abandon(
            streamIDs,
            HTTP2EngineError(.cancelled, errorCode: HTTP2ErrorCode.cancel, "the caller was cancelled")
        )
    }

    /// Resets streams still waiting for their answer with CANCEL and fails their waiters.
    private func abandon(_ streamIDs: [Int32], _ error: HTTP2EngineError) {
        for streamID in streamIDs {
            guard let waiter = pending.removeValue(forKey: streamID) else { continue }
            session?.resetStream(streamID, errorCode: HTTP2ErrorCode.cancel)
            waiter.complete(.failure(error))
        }
        flush()
    }

    var inFlight: Int { pending.count }
    var remoteMaxConcurrentStreams: UInt32 { session?.remoteMaxConcurrentStreams ?? 1 }
    var headerEncoderTableSize: Int { session?.headerEncoderTableSize ?? 0 }
    var isUsable: Bool { session != nil && !goingAway && context?.channel.isActive == true }

    func ping() {
        session?.submitPing()
        flush()
    }

    // MARK: Server

    /// Answers a request with a header block that starts with `:status`. Without a body the answer is one
    /// HEADERS frame with END_STREAM.
    func respond(streamID: Int32, headers: HTTP2HeaderBlock, body: ByteBuffer?) {
        guard let session else { return }
        do {
            try session.submitResponse(streamID: streamID, headers: headers, body: body)
            if body != nil { startStallCheck() }
        } catch {
            session.resetStream(streamID, errorCode: HTTP2ErrorCode.internalError)
        }
        flushSoon()
    }

    /// Flushes once the event loop has run what is queued now: answers finished by several tasks at about the
    /// same time go out in one write (one TLS record and one syscall) instead of one each.
    private func flushSoon() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.flush()
        }
    }

    func resetStream(_ streamID: Int32, errorCode: UInt32) {
        session?.resetStream(streamID, errorCode: errorCode)
        flush()
    }

    /// Starts an answer whose body follows in parts (`writeBody`).
    func startStreamingResponse(streamID: Int32, headers: HTTP2HeaderBlock) -> Bool {
        guard let session else { return false }
        do {
            try session.submitStreamingResponse(streamID: streamID, headers: headers)
        } catch {
            session.resetStream(streamID, errorCode: HTTP2ErrorCode.internalError)
            flushSoon()
            return false
        }
        startStallCheck()
        flushSoon()
        return true
    }

    /// Adds to a streaming answer's body; the future completes when the writer may go on (its stream and the
    /// connection have room again), and fails when the stream or connection is gone.
    func writeBody(streamID: Int32, _ buffer: ByteBuffer, end: Bool) -> EventLoopFuture<Void> {
        guard let session, let context else {
            // Called on the loop by the writer's bound handler, so the loop is known even after removal.
            let loop = eventLoop ?? MultiThreadedEventLoopGroup.singleton.any()
            return loop.makeFailedFuture(HTTP2EngineError(.connectionClosed, "the connection closed"))
        }
        guard session.appendBody(streamID, buffer, end: end) else {
            return context.eventLoop.makeFailedFuture(HTTP2EngineError(.streamReset, "the stream closed"))
        }
        flush()
        if end || hasRoom(streamID) { return context.eventLoop.makeSucceededVoidFuture() }
        let promise = context.eventLoop.makePromise(of: Void.self)
        roomWaiters[streamID]?.fail(HTTP2EngineError(.session, "a second writer on one stream"))
        roomWaiters[streamID] = promise
        return promise.futureResult
    }

    private func hasRoom(_ streamID: Int32) -> Bool {
        guard let session else { return true }
        return (session.queuedBodyBytes(streamID) ?? 0) < configuration.streamBuffer
            && session.queuedBodyBytes < configuration.connectionBuffer
    }

    /// Lets waiting writers go on whose stream and connection have room again, or whose stream is gone.
    private func wakeWriters() {
        guard !roomWaiters.isEmpty, let session else { return }
        for (streamID, promise) in roomWaiters {
            if session.queuedBodyBytes(streamID) == nil {
                roomWaiters[streamID] = nil
                promise.fail(HTTP2EngineError(.streamReset, "the stream closed"))
            } else if hasRoom(streamID) {
                roomWaiters[streamID] = nil
                promise.succeed()
            }
        }
    }

    /// Closes a connection whose peer has let none of its queued answers out for the stall timeout (a zero
    /// window held open): what it holds would otherwise stay until the connection closes.
    private func startStallCheck() {
        guard stallCheck == nil, let context else { return }
        let interval = TimeAmount.nanoseconds(max(configuration.stallTimeout.nanoseconds / 4, 1_000_000))
        stallCheck = context.eventLoop.assumeIsolated().scheduleTask(in: interval) { [weak self] in
            guard let self else { return }
            self.stallCheck = nil
            guard let session = self.session, session.queuedBodyBytes > 0 else { return }
            if NIODeadline.now() - session.lastBodyProgress > self.configuration.stallTimeout {
                self.goAway(errorCode: HTTP2ErrorCode.enhanceYourCalm, debugData: "no progress", close: true)
            } else {
                self.startStallCheck()
            }
        }
    }

    /// Streams whose reader has asked for a pause: while any has, the connection is not read (its other streams
    /// wait too, as they would for a connection window a slow reader keeps shut).
    private var pausedStreams: Set<Int32> = []

    /// Stops reading the connection until `resumeReading` for every stream that paused it (or its close).
    func pauseReading(streamID: Int32) {
        guard let context, pausedStreams.insert(streamID).inserted, pausedStreams.count == 1 else { return }
        context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
    }

    func resumeReading(streamID: Int32) {
        guard let context, pausedStreams.remove(streamID) != nil, pausedStreams.isEmpty else { return }
        context.channel.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in }
        context.read()
    }

    /// Announces new SETTINGS (a server changing its stream limit at run time).
    func announce(maxConcurrentStreams: UInt32) {
        try? session?.submitSettings([(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, maxConcurrentStreams)])
        flush()
    }

    /// Sends GOAWAY naming `lastStreamID` (default: the last stream processed); the connection closes once
    /// open streams finish, or at once with `close`.
    func goAway(errorCode: UInt32, debugData: String, lastStreamID: Int32? = nil, close: Bool) {
        session?.submitGoAway(errorCode: errorCode, debugData: debugData, lastStreamID: lastStreamID)
        flush()
        if close { context?.close(promise: nil) }
    }

    // MARK: Plumbing

    private func dispatch(_ events: [HTTP2Event]) {
        for event in events {
            // Owners learn of an event before any promise it settles resumes its waiter.
            onEvent?(event)
            switch event {
            case .message(let streamID, let message):
                if configuration.role == .server {
                    onRequest?(streamID, message, self)
                } else if let waiter = pending.removeValue(forKey: streamID) {
                    waiter.complete(.success(message))
                }
            case .streamClosed(let streamID, let errorCode):
                resumeReading(streamID: streamID)
                roomWaiters.removeValue(forKey: streamID)?.fail(
                    HTTP2EngineError(.streamReset, errorCode: errorCode, "the stream closed")
                )
                if let waiter = pending.removeValue(forKey: streamID) {
                    let code: HTTP2EngineError.Code =
                        errorCode == HTTP2ErrorCode.refusedStream ? .notProcessed : .streamReset
                    waiter.complete(
                        .failure(HTTP2EngineError(code, errorCode: errorCode, "the stream closed without an answer"))
                    )
                }
            case .goAway(let lastStreamID, let errorCode, let debugData):
                goingAway = true
                // Streams above the last one the peer processed were never seen: they may be resent elsewhere.
                for streamID in pending.keys where streamID > lastStreamID {
                    if let waiter = pending.removeValue(forKey: streamID) {
                        waiter.complete(.failure(HTTP2EngineError(.notProcessed, errorCode: errorCode, debugData)))
                    }
                }
            case .remoteSettings:
                settingsReceived?.succeed()
                settingsReceived = nil
            case .pingAcknowledged, .connectionClosed, .requestBodyPart, .requestBodyEnd:
                break
            }
        }
    }

    private func flush() {
        guard !reading, let session, let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: 0)
        do {
            let events = try session.drainOutput(into: &buffer)
            if buffer.readableBytes > 0 { context.writeAndFlush(wrapOutboundOut(buffer), promise: nil) }
            dispatch(events)
            wakeWriters()
            if !session.isAlive { context.close(promise: nil) }
        } catch {
            failAll(HTTP2EngineError(.session, "\(error)"))
            context.close(promise: nil)
        }
    }

    /// Completes when the peer's first SETTINGS frame has arrived (a client must not open streams before it
    /// knows the peer's stream limit).
    func whenSettingsReceived(promise: EventLoopPromise<Void>) {
        if session?.remoteSettingsSeen == true {
            promise.succeed()
        } else if context == nil || session == nil {
            promise.fail(HTTP2EngineError(.connectionClosed, "the connection closed before SETTINGS"))
        } else {
            settingsReceived = promise
        }
    }

    private func failAll(_ error: HTTP2EngineError) {
        settingsReceived?.fail(error)
        settingsReceived = nil
        let writers = roomWaiters
        roomWaiters.removeAll()
        for writer in writers.values { writer.fail(error) }
        let waiters = pending
        pending.removeAll()
        for waiter in waiters.values { waiter.complete(.failure(error)) }
    }
}

extension NIOLoopBound where Value == HTTP2ConnectionHandler {
    /// Resets a stream from any thread.
    func reset(streamID: Int32, errorCode: UInt32) {
        if eventLoop.inEventLoop {
            value.resetStream(streamID, errorCode: errorCode)
        } else {
            eventLoop.execute { self.value.resetStream(streamID, errorCode: errorCode) }
        }
    }

    /// Answers a request from any thread: at once when called on the connection's event loop (where requests are
    /// handled, and where the REST API's tasks nearly always end), else queued to it.
    func respond(streamID: Int32, headers: HTTP2HeaderBlock, body: ByteBuffer?) {
        if eventLoop.inEventLoop {
            value.respond(streamID: streamID, headers: headers, body: body)
        } else {
            eventLoop.execute { self.value.respond(streamID: streamID, headers: headers, body: body) }
        }
    }
}
