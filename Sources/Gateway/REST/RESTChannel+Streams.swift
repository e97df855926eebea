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

/// Writes a routed answer to its HTTP/2 stream. Up to `threshold` bytes are gathered and sent in one piece with
/// their length; past it the answer streams: headers first, then each part as it is produced, the writer waiting
/// while the client's window keeps its stream's or the connection's queue full. A client that opens its window
/// no more holds at most those queues, not whole answers.
struct HTTP2BodyWriter: ResponseBodyWriter {
    /// Whether the headers have gone out (an error can then only reset the stream).
    final class Progress: Sendable {
        private let state = Mutex(false)
        var started: Bool { state.withLock { $0 } }
        func start() { state.withLock { $0 = true } }
    }

    static let threshold = 64 * 1024

    let handler: NIOLoopBound<HTTP2ConnectionHandler>
    let streamID: Int32
    let head: [HTTP2Header]
    let statedLength: String?
    let sendsBody: Bool
    let progress = Progress()
    private var buffered: ByteBuffer?
    private var counted = 0
    private var streaming = false

    init(
        handler: NIOLoopBound<HTTP2ConnectionHandler>,
        streamID: Int32,
        head: [HTTP2Header],
        statedLength: String?,
        sendsBody: Bool
    ) {
        self.handler = handler
        self.streamID = streamID
        self.head = head
        self.statedLength = statedLength
        self.sendsBody = sendsBody
    }

    mutating func write(_ buffer: ByteBuffer) async throws {
        guard sendsBody else {
            counted += buffer.readableBytes  // HEAD: the length GET would send, nothing more
            return
        }
        if streaming { return try await send(buffer, end: false) }
        if buffered == nil {
            buffered = buffer
        } else {
            var buffer = buffer
            buffered?.writeBuffer(&buffer)
        }
        guard let gathered = buffered, gathered.readableBytes > Self.threshold else { return }
        streaming = true
        buffered = nil
        progress.start()
        var headers = head
        if let statedLength { headers.append(HTTP2Header("content-length", statedLength)) }
        let (handler, streamID, block) = (handler, streamID, HTTP2HeaderBlock(headers))
        let started = try await handler.eventLoop.submit {
            handler.value.startStreamingResponse(streamID: streamID, headers: block)
        }
        .get()
        guard started else { throw HTTP2EngineError(.streamReset, "the stream closed") }
        try await send(gathered, end: false)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        if streaming { return try await send(ByteBuffer(), end: true) }
        let body = sendsBody ? buffered : nil
        let length = sendsBody ? String(body?.readableBytes ?? 0) : statedLength ?? String(counted)
        progress.start()
        handler.respond(
            streamID: streamID,
            headers: HTTP2HeaderBlock(head + [HTTP2Header("content-length", length)]),
            body: body.flatMap { $0.readableBytes > 0 ? $0 : nil }
        )
    }

    private func send(_ buffer: ByteBuffer, end: Bool) async throws {
        let (handler, streamID) = (handler, streamID)
        if handler.eventLoop.inEventLoop {
            try await handler.value.writeBody(streamID: streamID, buffer, end: end).get()
        } else {
            try await handler.eventLoop.flatSubmit { handler.value.writeBody(streamID: streamID, buffer, end: end) }
                .get()
        }
    }
}

/// The requests of one HTTP/2 connection whose tasks are still running, by stream. Used on the connection's event
/// loop only.
final class StreamWork {
    private var tasks: [Int32: Task<Void, Never>] = [:]
    private var open: Set<Int32> = []
    /// The bodies of streamed requests still arriving.
    var bodies: [Int32: StreamedBody.Producer.Source] = [:]
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Whether another request may start: cancelled requests whose tasks have not ended yet still count.
    var hasRoom: Bool { tasks.count < limit }
    var running: Int { tasks.count }

    func started(_ streamID: Int32, _ task: Task<Void, Never>) {
        tasks[streamID] = task
        open.insert(streamID)
    }

    /// Every body source is finished before it goes: a source dropped unfinished traps (NIO's producer checks), and
    /// a body that ends without an error would pass for a complete upload.
    deinit {
        for source in bodies.values { source.finish(HTTP2EngineError(.connectionClosed, "the connection closed")) }
    }

    /// The stream closed: its answer was sent (the task is ending anyway) or the client reset it (nobody will
    /// read the answer, so the work stops).
    func streamClosed(_ streamID: Int32) {
        bodies.removeValue(forKey: streamID)?.finish(HTTP2EngineError(.streamReset, "the stream closed"))
        guard open.remove(streamID) != nil else { return }
        tasks[streamID]?.cancel()
    }

    /// The connection is gone: every body still arriving fails and every request's work stops (nobody can read
    /// its answer).
    func connectionClosed() {
        let sources = bodies
        bodies = [:]
        for source in sources.values { source.finish(HTTP2EngineError(.connectionClosed, "the connection closed")) }
        for streamID in open { tasks[streamID]?.cancel() }
        open = []
    }

    func finished(_ streamID: Int32, abandoningBody: Bool = false) {
        tasks[streamID] = nil
        open.remove(streamID)
        if abandoningBody {
            bodies.removeValue(forKey: streamID)?.finish(HTTP2EngineError(.streamReset, "the request was answered"))
        }
    }
}

extension NIOLoopBound where Value == StreamWork {
    /// Records the end of a request's task from wherever it ended.
    func finished(_ streamID: Int32, abandoningBody: Bool = false) {
        if eventLoop.inEventLoop {
            value.finished(streamID, abandoningBody: abandoningBody)
        } else {
            eventLoop.execute { self.value.finished(streamID, abandoningBody: abandoningBody) }
        }
    }
}

/// Closes an HTTP/2 connection that has been silent for the idle timeout.
final class IdleCloser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// Whether requests are still being answered (the connection is then waiting, not idle).
    let busy: () -> Bool

    init(busy: @escaping () -> Bool = { false }) {
        self.busy = busy
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if !busy() { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}

/// The reader's side of a streamed request body: when it has read enough to want more, the connection is read
/// again.
final class StreamedBody: NIOAsyncSequenceProducerDelegate {
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, StreamedBody
    >

    let handler: NIOLoopBound<HTTP2ConnectionHandler>
    let streamID: Int32

    init(handler: NIOLoopBound<HTTP2ConnectionHandler>, streamID: Int32) {
        self.handler = handler
        self.streamID = streamID
    }

    func produceMore() { resume() }
    func didTerminate() { resume() }

    private func resume() {
        let (handler, streamID) = (handler, streamID)
        handler.eventLoop.execute { handler.value.resumeReading(streamID: streamID) }
    }
}

/// Runs tasks on an event loop's thread (a task executor preference), so a request's task starts and finishes
/// where its connection lives instead of hopping to the cooperative pool and back.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
