import CNGHTTP2
import NIOCore

/// One libnghttp2 session: frames in, frames out, events up. Confined to its channel's event loop.
///
/// Memory safety at the C boundary rests on three rules:
/// - nghttp2 calls back only from inside `receive` and `drainOutput`, which this object runs, so the unretained
///   `self` it passes as user data is always alive (the session is deleted in `deinit`, before `self` goes away);
/// - header names and values are copied by nghttp2 during `submit*` (no `NO_COPY` flags), so the Swift storage
///   only has to live for the call;
/// - outbound bodies stay in `outboundBodies`, owned by Swift, and are read by stream id, never by pointer.
/// Events raised inside callbacks are queued and handed out after nghttp2 returns, so an event handler may
/// submit frames without re-entering the session.
final class NGHTTP2Session {
    enum Role { case client, server }

    private struct InboundStream {
        var headers: [HTTP2Header] = []
        var body = ByteBuffer()
        /// The header list's size so far in HPACK's measure (name + value + 32 per field), counted as fields
        /// arrive: a block is judged while it is decoded, not after it has been stored whole.
        var headerListSize = 0
        var headersTooLarge = false
        /// Answered before its end (413, 431): what else arrives for it is discarded.
        var answered = false
        /// Handed up at its headers; its body goes up in parts.
        var streamed = false
        var streamedBytes = 0
    }

    /// What one peer may make this side hold: a header list (HPACK's measure), and a message body.
    struct Limits {
        var maxHeaderListSize = 16 * 1024
        var maximumBodySize = 1 << 20
        /// Server side: requests with a body whose `:path` this accepts are handed up at their headers and their
        /// body in parts, up to `streamedBodySize` bytes (the rest is discarded and the request told so).
        var streamsBody: (@Sendable (String) -> Bool)?
        var streamedBodySize = 64 << 20
    }

    // nghttp2 owns what this points to; `deinit` frees it.
    private var session: OpaquePointer?
    private var inbound: [Int32: InboundStream] = [:]
    private var outboundBodies: [Int32: ByteBuffer] = [:]
    /// Streams whose body is still being produced: an empty buffer then defers instead of ending the stream.
    private var streaming: Set<Int32> = []
    /// Body bytes queued for sending on all streams, and when the peer last let some of them go out.
    private(set) var queuedBodyBytes = 0
    private(set) var lastBodyProgress = NIODeadline.now()
    private var events: [HTTP2Event] = []
    /// Streams answered early whose peer may still be sending: reset (NO_ERROR) once the answer is out.
    private var resetAfterAnswer: Set<Int32> = []
    private let limits: Limits
    let role: Role
    private(set) var remoteSettingsSeen = false

    /// Creates the session and queues the connection preface (client) and our SETTINGS, which announce the
    /// header list limit besides `settings`.
    init(role: Role, settings: [(id: nghttp2_settings_id, value: UInt32)], limits: Limits = Limits()) throws {
        self.role = role
        self.limits = limits
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2EngineError(.session, "cannot allocate nghttp2 callbacks")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        Self.install(callbacks)
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw HTTP2EngineError(.session, "cannot allocate nghttp2 options")
        }
        defer { nghttp2_option_del(option) }
        // A peer's header blocks are judged by this side (counted as they are decoded), not by nghttp2, which
        // would only refuse them after storing them whole.
        nghttp2_option_set_max_continuations(option, 8)
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let created =
            role == .client
            ? nghttp2_session_client_new2(&session, callbacks, userData, option)
            : nghttp2_session_server_new2(&session, callbacks, userData, option)
        guard created == 0, session != nil else { throw HTTP2EngineError(.session, "cannot create an nghttp2 session") }
        let headerListLimit = UInt32(clamping: limits.maxHeaderListSize)
        try submitSettings(settings + [(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, headerListLimit)])
    }

    deinit {
        nghttp2_session_del(session)
    }

    // MARK: I/O

    /// Feeds received bytes to nghttp2; returns the events they produced.
    func receive(_ buffer: ByteBuffer) throws -> [HTTP2Event] {
        let consumed = buffer.withUnsafeReadableBytes { bytes -> Int in
            guard let base = bytes.baseAddress else { return 0 }
            return nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        }
        if consumed < 0 {
            throw HTTP2EngineError(.session, errorCode: HTTP2ErrorCode.protocolError, Self.describe(consumed))
        }
        return takeEvents()
    }

    /// Moves every frame nghttp2 has queued into `buffer`; returns the events sending produced (stream closes).
    func drainOutput(into buffer: inout ByteBuffer) throws -> [HTTP2Event] {
        while true {
            var chunk: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &chunk)
            if count < 0 { throw HTTP2EngineError(.session, Self.describe(count)) }
            guard count > 0, let chunk else { break }
            buffer.writeBytes(UnsafeRawBufferPointer(start: chunk, count: count))
        }
        return takeEvents()
    }

    /// Whether the session still wants to talk (false after GOAWAY has been exchanged and streams are done).
    var isAlive: Bool {
        nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    var remoteMaxConcurrentStreams: UInt32 {
        nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }

    /// Bytes in the HPACK encoder's dynamic table (for tests of what gets indexed).
    var headerEncoderTableSize: Int { nghttp2_session_get_hd_deflate_dynamic_table_size(session) }

    // MARK: Submitting frames

    /// Queues a request; returns its stream id.
    func submitRequest(headers: HTTP2HeaderBlock, body: ByteBuffer?) throws -> Int32 {
        let streamID = withNameValues(headers) { nva, count in
            if body != nil {
                var provider = Self.bodyProvider()
                return nghttp2_submit_request(session, nil, nva, count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, nva, count, nil, nil)
        }
        if streamID < 0 { throw HTTP2EngineError(.session, Self.describe(Int(streamID))) }
        if let body { queue(streamID, body) }
        return streamID
    }

    /// Queues a response. Without a body the HEADERS frame carries END_STREAM, as APNs' answers do.
    func submitResponse(streamID: Int32, headers: HTTP2HeaderBlock, body: ByteBuffer?) throws {
        answeredEarly(streamID)
        let hasBody = body.map { $0.readableBytes > 0 } ?? false
        if hasBody, let body { queue(streamID, body) }
        let result = withNameValues(headers) { nva, count in
            if hasBody {
                var provider = Self.bodyProvider()
                return nghttp2_submit_response(session, streamID, nva, count, &provider)
            }
            return nghttp2_submit_response(session, streamID, nva, count, nil)
        }
        if result != 0 {
            dropBody(streamID)
            throw HTTP2EngineError(.session, Self.describe(Int(result)))
        }
    }

    /// Queues a response whose body follows in parts (`appendBody`): DATA frames go out as the peer's window
    /// allows, and the stream waits (deferred) while its queue is empty.
    func submitStreamingResponse(streamID: Int32, headers: HTTP2HeaderBlock) throws {
        answeredEarly(streamID)
        streaming.insert(streamID)
        queue(streamID, ByteBuffer())
        let result = withNameValues(headers) { nva, count in
            var provider = Self.bodyProvider()
            return nghttp2_submit_response(session, streamID, nva, count, &provider)
        }
        if result != 0 {
            dropBody(streamID)
            throw HTTP2EngineError(.session, Self.describe(Int(result)))
        }
    }

    /// A request answered while its body is still arriving (a streamed upload refused or out of time): what else
    /// arrives is discarded, and the stream is reset (NO_ERROR) once the answer is out, so the peer stops sending.
    private func answeredEarly(_ streamID: Int32) {
        guard role == .server, let index = inbound.index(forKey: streamID), !inbound.values[index].answered else {
            return
        }
        inbound.values[index].answered = true
        inbound.values[index].body = ByteBuffer()
        resetAfterAnswer.insert(streamID)
    }

    /// Adds to a streaming response's body (`end`: it is complete); false when the stream is gone.
    func appendBody(_ streamID: Int32, _ buffer: ByteBuffer, end: Bool) -> Bool {
        guard streaming.contains(streamID), outboundBodies[streamID] != nil else { return false }
        queue(streamID, buffer)
        if end { streaming.remove(streamID) }
        _ = nghttp2_session_resume_data(session, streamID)
        return true
    }

    /// Body bytes queued for one stream; nil when it has no body queued or being produced.
    func queuedBodyBytes(_ streamID: Int32) -> Int? {
        outboundBodies[streamID]?.readableBytes
    }

    private func queue(_ streamID: Int32, _ buffer: ByteBuffer) {
        if queuedBodyBytes == 0 { lastBodyProgress = .now() }
        queuedBodyBytes += buffer.readableBytes
        if var existing = outboundBodies.removeValue(forKey: streamID) {
            var buffer = buffer
            existing.writeBuffer(&buffer)
            outboundBodies[streamID] = existing
        } else {
            outboundBodies[streamID] = buffer
        }
    }

    private func dropBody(_ streamID: Int32) {
        streaming.remove(streamID)
        if let body = outboundBodies.removeValue(forKey: streamID) { queuedBodyBytes -= body.readableBytes }
    }

    func submitSettings(_ settings: [(id: nghttp2_settings_id, value: UInt32)]) throws {
        var entries = settings.map { nghttp2_settings_entry(settings_id: Int32($0.id.rawValue), value: $0.value) }
        let result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        if result != 0 { throw HTTP2EngineError(.session, Self.describe(Int(result))) }
    }

    func submitGoAway(errorCode: UInt32, debugData: String, lastStreamID: Int32?) {
        var bytes = Array(debugData.utf8)
        let lastStream = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        _ = nghttp2_submit_goaway(
            session,
            UInt8(NGHTTP2_FLAG_NONE.rawValue),
            lastStream,
            errorCode,
            &bytes,
            bytes.count
        )
    }

    func submitPing() {
        _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    func resetStream(_ streamID: Int32, errorCode: UInt32) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    // MARK: Callbacks (called by nghttp2 from inside `receive` and `drainOutput` only)

    private func takeEvents() -> [HTTP2Event] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    func beginHeaders(_ streamID: Int32) {
        // Looked up by index: comparing `inbound[streamID]` with nil copied the stream out.
        guard inbound.index(forKey: streamID) == nil else { return }
        var stream = InboundStream()
        // Room for an APNs request's fields (a server) or an answer's: grown one by one, the array was
        // reallocated three or four times per message.
        stream.headers.reserveCapacity(role == .server ? 12 : 4)
        inbound[streamID] = stream
    }

    func header(_ streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard var stream = inbound.removeValue(forKey: streamID) else { return }
        defer { inbound[streamID] = stream }
        // Past the limit nothing more of the block is kept: an HPACK bomb (one byte on the wire naming a 4 KiB
        // field in the dynamic table) costs a counter, not a copy.
        guard !stream.headersTooLarge, !stream.answered else { return }
        stream.headerListSize += name.count + value.count + 32
        if stream.headerListSize > limits.maxHeaderListSize {
            stream.headersTooLarge = true
            // The pseudo-headers (which come first) stay, so the refusal names its request.
            stream.headers.removeAll { !$0.name.hasPrefix(":") }
            return
        }
        // nghttp2 checks received names (HTTP messaging is on) and refuses upper-case ones, so the name is not
        // scanned again.
        stream.headers.append(
            HTTP2Header(
                lowercased: String(decoding: name, as: UTF8.self),
                String(decoding: value, as: UTF8.self)
            )
        )
    }

    func data(_ streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        // Moved out of the table and back: its buffer stays uniquely referenced while appending, and the stream
        // is not copied (copying it was 3% of the simulator's time).
        guard var stream = inbound.removeValue(forKey: streamID) else { return }
        defer { inbound[streamID] = stream }
        guard !stream.answered else { return }
        if stream.streamed {
            stream.streamedBytes += bytes.count
            if stream.streamedBytes > limits.streamedBodySize {
                // The request answers (413) when it reads the end; the stream is reset once the answer is out.
                stream.answered = true
                resetAfterAnswer.insert(streamID)
                events.append(.requestBodyEnd(streamID: streamID, tooLarge: true))
            } else {
                events.append(.requestBodyPart(streamID: streamID, ByteBuffer(bytes: bytes)))
            }
            return
        }
        if stream.body.readableBytes + bytes.count > limits.maximumBodySize {
            stream.answered = true
            stream.body = ByteBuffer()
            if role == .server {
                // A server answers it (413) at once, from the headers, and then resets the stream so that the
                // peer stops sending; what arrives meanwhile is discarded.
                resetAfterAnswer.insert(streamID)
                events.append(
                    .message(streamID: streamID, HTTP2Message(headers: stream.headers, bodyTooLarge: true))
                )
            } else {
                resetStream(streamID, errorCode: HTTP2ErrorCode.cancel)
            }
            return
        }
        stream.body.writeBytes(UnsafeRawBufferPointer(bytes))
    }

    func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch Int(header.type) {
        case Int(NGHTTP2_HEADERS.rawValue), Int(NGHTTP2_DATA.rawValue):
            let streamID = header.stream_id
            guard let index = inbound.index(forKey: streamID), !inbound.values[index].answered else { return }
            if inbound.values[index].headersTooLarge {
                // Answered (431) as soon as the block ends; a body that may follow is refused with a reset.
                inbound.values[index].answered = true
                inbound.values[index].body = ByteBuffer()
                if role == .server {
                    if !endStream { resetAfterAnswer.insert(streamID) }
                    let headers = inbound.values[index].headers
                    events.append(.message(streamID: streamID, HTTP2Message(headers: headers, headersTooLarge: true)))
                } else {
                    resetStream(streamID, errorCode: HTTP2ErrorCode.protocolError)
                }
                if endStream { inbound.remove(at: index) }
                return
            }
            if inbound.values[index].streamed {
                if endStream {
                    inbound.remove(at: index)
                    events.append(.requestBodyEnd(streamID: streamID, tooLarge: false))
                }
                return
            }
            if !endStream, role == .server, Int(header.type) == Int(NGHTTP2_HEADERS.rawValue),
                let streamsBody = limits.streamsBody,
                let path = inbound.values[index].headers.first(where: { $0.name == ":path" })?.value, streamsBody(path)
            {
                inbound.values[index].streamed = true
                let headers = inbound.values[index].headers
                events.append(.message(streamID: streamID, HTTP2Message(headers: headers, streamedBody: true)))
                return
            }
            guard endStream, let stream = inbound.removeValue(forKey: streamID) else { return }
            events.append(.message(streamID: streamID, HTTP2Message(headers: stream.headers, body: stream.body)))
        case Int(NGHTTP2_SETTINGS.rawValue):
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                remoteSettingsSeen = true
                events.append(.remoteSettings(maxConcurrentStreams: remoteMaxConcurrentStreams))
            }
        case Int(NGHTTP2_GOAWAY.rawValue):
            let goaway = frame.pointee.goaway
            var debug = ""
            if let data = goaway.opaque_data, goaway.opaque_data_len > 0 {
                debug = String(decoding: UnsafeBufferPointer(start: data, count: goaway.opaque_data_len), as: UTF8.self)
            }
            events.append(.goAway(lastStreamID: goaway.last_stream_id, errorCode: goaway.error_code, debugData: debug))
        case Int(NGHTTP2_PING.rawValue):
            if header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { events.append(.pingAcknowledged) }
        default:
            break
        }
    }

    /// Our answer's last frame is out: a stream answered early is reset (NO_ERROR, RFC 9113 section 8.1) so the
    /// peer stops sending a body nobody reads.
    func frameSent(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        guard header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
            resetAfterAnswer.remove(header.stream_id) != nil
        else { return }
        resetStream(header.stream_id, errorCode: HTTP2ErrorCode.noError)
    }

    func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        inbound[streamID] = nil
        dropBody(streamID)
        resetAfterAnswer.remove(streamID)
        events.append(.streamClosed(streamID: streamID, errorCode: errorCode))
    }

    /// Copies the next part of a stream's outbound body into nghttp2's buffer.
    func readBody(
        _ streamID: Int32,
        into target: UnsafeMutablePointer<UInt8>,
        capacity: Int,
        flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        guard var body = outboundBodies.removeValue(forKey: streamID) else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        if body.readableBytes == 0, streaming.contains(streamID) {
            // More is coming: nghttp2 asks again after `appendBody` resumes the stream.
            outboundBodies[streamID] = body
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        let count = min(capacity, body.readableBytes)
        body.withUnsafeReadableBytes { bytes in
            if let base = bytes.baseAddress {
                target.update(from: base.assumingMemoryBound(to: UInt8.self), count: count)
            }
        }
        body.moveReaderIndex(forwardBy: count)
        queuedBodyBytes -= count
        if count > 0 { lastBodyProgress = .now() }
        if body.readableBytes == 0, !streaming.contains(streamID) {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        } else {
            outboundBodies[streamID] = body
        }
        return count
    }

    /// Calls `body` with an nghttp2 name/value array pointing into the block's bytes.
    private func withNameValues<T>(_ block: HTTP2HeaderBlock, _ body: (UnsafePointer<nghttp2_nv>, Int) -> T) -> T {
        block.bytes.withUnsafeBufferPointer { bytes in
            // nghttp2 only reads through these pointers (it copies what it keeps), so they may point into
            // immutable storage.
            let base = UnsafeMutablePointer(mutating: bytes.baseAddress!)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: max(1, block.fields.count)) { nva in
                for (index, field) in block.fields.enumerated() {
                    let flags = field.indexed ? NGHTTP2_NV_FLAG_NONE : NGHTTP2_NV_FLAG_NO_INDEX
                    nva.initializeElement(
                        at: index,
                        to: nghttp2_nv(
                            name: base + field.name,
                            value: base + field.value,
                            namelen: field.nameLength,
                            valuelen: field.valueLength,
                            flags: UInt8(flags.rawValue)
                        )
                    )
                }
                return body(nva.baseAddress!, block.fields.count)
            }
        }
    }

    static func describe(_ code: Int) -> String {
        String(cString: nghttp2_strerror(Int32(code)))
    }
}
