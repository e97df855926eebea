import NIOCore

/// One header field of an HTTP/2 header block (pseudo-headers such as `:status` included).
public struct HTTP2Header: Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var value: String
    /// Whether HPACK may keep the field in its dynamic table. A value that is new in every message (an apns-id)
    /// is better sent unindexed: in the table it would only evict the fields that repeat.
    public var indexed = true

    /// HTTP/2 requires lower-case field names; the name is lower-cased here.
    public init(_ name: String, _ value: String) {
        // Names are nearly always written lower-case already; `lowercased()` allocates a copy every time.
        self.name = name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } ? name.lowercased() : name
        self.value = value
    }

    /// A name the caller guarantees is lower-case already (a literal): not checked again for every request.
    init(lowercased name: String, _ value: String, indexed: Bool = true) {
        self.name = name
        self.value = value
        self.indexed = indexed
    }

    public var description: String { "\(name): \(value)" }
}

/// A complete HTTP/2 message, request or response: its header block and its whole body.
///
/// The engine delivers messages whole because both of its users exchange small ones (APNs payloads are at most
/// 4 KiB, answers a few hundred bytes); bodies are capped by the session's `maximumBodySize`. The exception is a
/// request whose path the server streams (`NGHTTP2Session.Limits.streamsBody`: user imports): it arrives at
/// its headers, `streamedBody` set, and its body follows in parts (`requestBodyPart`, `requestBodyEnd`).
public struct HTTP2Message: Sendable {
    public var headers: [HTTP2Header]
    public var body: ByteBuffer
    /// A request whose body went past the engine's limit: `body` is empty, the request is to be refused.
    public var bodyTooLarge: Bool
    /// A request whose header list went past the announced limit: only its pseudo-headers were kept, and it is to
    /// be refused (431).
    public var headersTooLarge: Bool
    /// A request delivered at its headers: its body follows as `requestBodyPart` events.
    public var streamedBody: Bool

    public init(
        headers: [HTTP2Header],
        body: ByteBuffer = ByteBuffer(),
        bodyTooLarge: Bool = false,
        headersTooLarge: Bool = false,
        streamedBody: Bool = false
    ) {
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.headersTooLarge = headersTooLarge
        self.streamedBody = streamedBody
    }

    /// The first value of a field.
    public subscript(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// `:status` as a number, for responses.
    public var status: Int? { self[":status"].flatMap { Int($0) } }
}

/// One request's outcome in a batch: the response or why there is none, and how long it took.
public struct HTTP2Answer: Sendable {
    public var result: Result<HTTP2Message, HTTP2EngineError>
    public var latency: TimeAmount
}

/// What a connection reports, on its event loop, as nghttp2 parses frames.
public enum HTTP2Event: Sendable {
    /// A whole message arrived: a request on a server, a response on a client.
    case message(streamID: Int32, HTTP2Message)
    /// A part of a streamed request's body.
    case requestBodyPart(streamID: Int32, ByteBuffer)
    /// A streamed request's body ended, or went past `streamedBodySize` (the rest is discarded).
    case requestBodyEnd(streamID: Int32, tooLarge: Bool)
    /// A stream closed; `errorCode` is 0 for a normal close, else the RST_STREAM or connection error code.
    case streamClosed(streamID: Int32, errorCode: UInt32)
    /// The peer's SETTINGS arrived or changed.
    case remoteSettings(maxConcurrentStreams: UInt32)
    /// The peer is going away: streams above `lastStreamID` were not processed and may be retried elsewhere.
    case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: String)
    /// The peer acknowledged our PING.
    case pingAcknowledged
    /// The TCP connection closed.
    case connectionClosed
}

/// HTTP/2 error codes (RFC 9113 section 7) the broker uses by name.
public enum HTTP2ErrorCode {
    public static let noError: UInt32 = 0x0
    public static let protocolError: UInt32 = 0x1
    public static let internalError: UInt32 = 0x2
    public static let refusedStream: UInt32 = 0x7
    public static let cancel: UInt32 = 0x8
    public static let enhanceYourCalm: UInt32 = 0xb
}

/// Failures of the HTTP/2 engine.
public struct HTTP2EngineError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        let name: String
        /// nghttp2 refused a call or the peer broke the protocol.
        public static let session = Code(name: "session")
        /// The peer reset the stream (see `errorCode`).
        public static let streamReset = Code(name: "stream-reset")
        /// The request's deadline passed; the stream was cancelled.
        public static let deadlineExceeded = Code(name: "deadline-exceeded")
        /// The connection closed (or is going away) before an answer came.
        public static let connectionClosed = Code(name: "connection-closed")
        /// The stream was not processed by the peer (GOAWAY above it, or REFUSED_STREAM): safe to resend.
        public static let notProcessed = Code(name: "not-processed")
        /// The caller's task was cancelled; the stream was reset with CANCEL (the peer may have processed it).
        public static let cancelled = Code(name: "cancelled")
    }

    public var code: Code
    public var errorCode: UInt32
    public var detail: String

    public init(_ code: Code, errorCode: UInt32 = 0, _ detail: String = "") {
        self.code = code
        self.errorCode = errorCode
        self.detail = detail
    }

    public var description: String {
        "HTTP/2 \(code.name) (error code \(errorCode))\(detail.isEmpty ? "" : ": \(detail)")"
    }
}
