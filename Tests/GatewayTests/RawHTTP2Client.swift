import CNGHTTP2
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// An HTTP/2 client that writes frames by hand over TLS (ALPN h2), as an attacker would: nothing it sends is
/// checked, so it can send what a well-behaved client never does. Received frames are parsed; header blocks are
/// decoded with libnghttp2's HPACK inflater.
final class RawHTTP2Client: Sendable {
    struct Frame: Sendable, CustomStringConvertible {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        static let data: UInt8 = 0, headers: UInt8 = 1, rstStream: UInt8 = 3, settings: UInt8 = 4, ping: UInt8 = 6
        static let goAway: UInt8 = 7, windowUpdate: UInt8 = 8, continuation: UInt8 = 9
        var endStream: Bool { flags & 0x1 != 0 }
        /// RST_STREAM's or GOAWAY's error code.
        var errorCode: UInt32? {
            switch type {
            case Self.rstStream where payload.count >= 4: return Self.integer(payload[0..<4])
            case Self.goAway where payload.count >= 8: return Self.integer(payload[4..<8])
            default: return nil
            }
        }
        static func integer(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.reduce(0) { $0 << 8 | UInt32($1) } }
        var description: String { "frame(type \(type), flags \(flags), stream \(stream), \(payload.count) bytes)" }
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let received = NIOLockedValueBox((bytes: [UInt8](), closed: false))

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            received.withLockedValue { $0.bytes += buffer.readableBytesView }
        }

        func channelInactive(context: ChannelHandlerContext) {
            received.withLockedValue { $0.closed = true }
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }

    let channel: any Channel
    private let collector: Collector

    private init(channel: any Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    /// Connects over TLS; with `preface`, sends the client preface and an empty SETTINGS frame.
    /// `from` picks the loopback address the connection comes from (127.0.0.2: another client than the tests').
    /// `proxyHeader` is written first, in the clear, as a load balancer writes its PROXY protocol header.
    static func connect(
        port: Int,
        preface: Bool = true,
        tls: Bool = true,
        from source: String? = nil,
        alpn: [String] = ["h2"],
        proxyHeader: [UInt8]? = nil
    ) async throws -> RawHTTP2Client {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .none
        configuration.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: configuration)
        let collector = Collector()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let channel =
            try await bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if tls && proxyHeader == nil {
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: context, serverHostname: nil)
                        )
                    }
                    try channel.pipeline.syncOperations.addHandler(collector)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        if let proxyHeader {
            try await channel.writeAndFlush(ByteBuffer(bytes: proxyHeader))
            if tls {
                try await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: context, serverHostname: nil),
                        position: .first
                    )
                }.get()
            }
        }
        let client = RawHTTP2Client(channel: channel, collector: collector)
        if preface {
            try await client.send(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Self.settings([]))
        }
        return client
    }

    func send(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
    }

    /// Closes without waiting for TLS's close_notify exchange (NIOSSL waits up to five seconds for it).
    func close() async {
        channel.close(promise: nil)
    }

    var isClosed: Bool { collector.received.withLockedValue { $0.closed } }

    /// Every byte received so far (for a client that does not speak HTTP/2).
    var receivedBytes: [UInt8] { collector.received.withLockedValue { $0.bytes } }

    /// Every whole frame received so far (the server speaks first with SETTINGS; there is no preface to skip).
    var frames: [Frame] {
        let bytes = collector.received.withLockedValue { $0.bytes }
        var frames: [Frame] = []
        var offset = 0
        while bytes.count - offset >= 9 {
            let length = Int(Frame.integer(bytes[offset..<offset + 3]))
            guard bytes.count - offset >= 9 + length else { break }
            frames.append(
                Frame(
                    type: bytes[offset + 3],
                    flags: bytes[offset + 4],
                    stream: Frame.integer(bytes[offset + 5..<offset + 9]) & 0x7fff_ffff,
                    payload: Array(bytes[offset + 9..<offset + 9 + length])
                )
            )
            offset += 9 + length
        }
        return frames
    }

    /// Waits until `condition` holds for the frames received (or the connection closed), up to `seconds`.
    @discardableResult
    func wait(seconds: Double = 30, until condition: ([Frame]) -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition(frames) { return true }
            if isClosed { return condition(frames) }
            try await Task.sleep(for: .milliseconds(50))
        }
        return condition(frames)
    }

    /// The header fields of every response received, by stream.
    var responses: [UInt32: [(String, String)]] {
        var result: [UInt32: [(String, String)]] = [:]
        for (stream, fields) in Self.decodeHeaderBlocks(frames) where result[stream] == nil { result[stream] = fields }
        return result
    }

    /// The `:status` of every response received, by stream (header blocks decoded in the order they came).
    var statuses: [UInt32: Int] {
        var result: [UInt32: Int] = [:]
        for (stream, fields) in Self.decodeHeaderBlocks(frames) {
            if let status = fields.first(where: { $0.0 == ":status" }).flatMap({ Int($0.1) }) {
                result[stream] = status
            }
        }
        return result
    }

    /// The decoded header blocks of a frame sequence, in order: HEADERS plus its CONTINUATIONs.
    static func decodeHeaderBlocks(_ frames: [Frame]) -> [(UInt32, [(String, String)])] {
        var inflater: OpaquePointer?
        guard nghttp2_hd_inflate_new(&inflater) == 0 else { return [] }
        defer { nghttp2_hd_inflate_del(inflater) }
        var blocks: [(UInt32, [(String, String)])] = []
        var pending: (UInt32, [UInt8])?
        for frame in frames {
            var fragment = frame.payload
            if frame.type == Frame.headers {
                var start = 0
                var end = fragment.count
                if frame.flags & 0x8 != 0, let pad = fragment.first {  // PADDED
                    start = 1
                    end -= Int(pad)
                }
                if frame.flags & 0x20 != 0 { start += 5 }  // PRIORITY
                fragment = start <= end ? Array(fragment[start..<end]) : []
                pending = (frame.stream, fragment)
            } else if frame.type == Frame.continuation, pending != nil {
                pending?.1 += fragment
            } else {
                continue
            }
            guard frame.flags & 0x4 != 0, let (stream, block) = pending else { continue }  // END_HEADERS
            pending = nil
            var fields: [(String, String)] = []
            var input = block[...]
            while true {
                var pair = nghttp2_nv()
                var flags: Int32 = 0
                let used = input.withUnsafeBufferPointer { bytes in
                    nghttp2_hd_inflate_hd2(inflater, &pair, &flags, bytes.baseAddress, bytes.count, 1)
                }
                guard used >= 0 else { return blocks }
                input = input.dropFirst(used)
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append(
                        (
                            String(decoding: UnsafeBufferPointer(start: pair.name, count: pair.namelen), as: UTF8.self),
                            String(
                                decoding: UnsafeBufferPointer(start: pair.value, count: pair.valuelen),
                                as: UTF8.self
                            )
                        )
                    )
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    break
                }
                if used == 0, input.isEmpty { break }
            }
            blocks.append((stream, fields))
        }
        return blocks
    }

    // MARK: Frames

    static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + bytes(stream) + payload
    }

    static func bytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    static func settings(_ entries: [(UInt16, UInt32)]) -> [UInt8] {
        frame(
            type: Frame.settings,
            stream: 0,
            entries.flatMap { [UInt8($0.0 >> 8), UInt8($0.0 & 0xff)] + bytes($0.1) }
        )
    }

    static let settingsAck = frame(type: Frame.settings, flags: 0x1, stream: 0, [])

    static func headers(stream: UInt32, _ block: [UInt8], endStream: Bool = true, endHeaders: Bool = true) -> [UInt8] {
        frame(
            type: Frame.headers,
            flags: (endStream ? 0x1 : 0) | (endHeaders ? 0x4 : 0),
            stream: stream,
            block
        )
    }

    static func continuation(stream: UInt32, _ block: [UInt8], endHeaders: Bool) -> [UInt8] {
        frame(type: Frame.continuation, flags: endHeaders ? 0x4 : 0, stream: stream, block)
    }

    static func data(stream: UInt32, _ payload: [UInt8], endStream: Bool = false) -> [UInt8] {
        frame(type: Frame.data, flags: endStream ? 0x1 : 0, stream: stream, payload)
    }

    static func reset(stream: UInt32, errorCode: UInt32 = 0x8) -> [UInt8] {
        frame(type: Frame.rstStream, stream: stream, bytes(errorCode))
    }

    static func windowUpdate(stream: UInt32, increment: UInt32) -> [UInt8] {
        frame(type: Frame.windowUpdate, stream: stream, bytes(increment))
    }

    // MARK: HPACK, by hand

    /// An HPACK integer with an `n`-bit prefix, the first byte's other bits set to `flags`.
    static func integer(_ value: Int, prefix n: Int, flags: UInt8) -> [UInt8] {
        let limit = (1 << n) - 1
        if value < limit { return [flags | UInt8(value)] }
        var out = [flags | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        out.append(UInt8(rest))
        return out
    }

    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return integer(bytes.count, prefix: 7, flags: 0) + bytes
    }

    /// A literal field that is never indexed, with a new name.
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x10] + string(name) + string(value)
    }

    /// A literal field with incremental indexing: it enters the dynamic table at index 62.
    static func indexedLiteral(_ name: String, _ value: String) -> [UInt8] {
        [0x40] + string(name) + string(value)
    }

    /// A reference to a table entry (1-61 static, 62 on the dynamic table's newest).
    static func indexed(_ index: Int) -> [UInt8] {
        integer(index, prefix: 7, flags: 0x80)
    }

    /// A request's pseudo-headers (and more fields) as one header block.
    static func request(
        _ method: String = "GET",
        _ path: String,
        authority: String = "localhost",
        _ fields: [(String, String)] = []
    ) -> [UInt8] {
        literal(":method", method) + literal(":scheme", "https") + literal(":path", path)
            + literal(":authority", authority) + fields.flatMap { literal($0.0, $0.1) }
    }
}

/// What a process has used, from /proc: for bounds on a server under attack.
struct ProcessUsage {
    /// Peak resident set (VmHWM) and current resident set, in bytes.
    var peakResident: Int
    var resident: Int
    /// User plus system CPU time, in seconds.
    var cpuSeconds: Double

    static func of(_ pid: Int32) -> ProcessUsage? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        func kilobytes(_ key: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(key + ":") } ?? ""
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let cpu = ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / ticks
        return ProcessUsage(peakResident: kilobytes("VmHWM"), resident: kilobytes("VmRSS"), cpuSeconds: cpu)
    }
}
