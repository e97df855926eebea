import Engine
import Logging
import NIOCore
import Synchronization

/// The PROXY protocol header (HAProxy's specification, versions 1 and 2) a TCP load balancer that passes TLS
/// through writes before the client's first byte: the client's address, which the connection's peer (the balancer)
/// would otherwise hide. Read on the HTTPS listener from trusted proxies only (`proxyProtocol` with
/// `trustedProxies`); anyone else could name any address.
enum ProxyHeader: Equatable {
    /// The header's bytes, and the client it names (nil for the balancer's own connections: version 2's LOCAL, a
    /// family the header leaves unspecified or version 1's UNKNOWN; the peer's address stands then).
    case header(length: Int, client: SocketAddress?)
    /// Not all of the header has arrived.
    case incomplete
    case invalid(String)

    /// The longest header read: version 1's is at most 107 bytes; version 2's addresses take 36 and the rest are
    /// extensions this broker does not read.
    static let maximumLength = 4096

    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]
    private static let v1Prefix = Array("PROXY ".utf8)

    /// Reads the header at the start of `bytes`.
    static func parse(_ bytes: ByteBuffer) -> ProxyHeader {
        let view = bytes.readableBytesView
        let prefix = min(view.count, 12)
        if view.prefix(prefix).elementsEqual(v2Signature.prefix(prefix)) {
            return view.count < 12 ? .incomplete : parseV2(Array(view.prefix(maximumLength)), available: view.count)
        }
        let start = min(view.count, v1Prefix.count)
        if view.prefix(start).elementsEqual(v1Prefix.prefix(start)) {
            return view.count < v1Prefix.count ? .incomplete : parseV1(view)
        }
        return .invalid("the connection does not start with a PROXY protocol header")
    }

    private static func parseV1(_ view: ByteBufferView) -> ProxyHeader {
        let bytes = Array(view.prefix(107))
        guard let newline = bytes.firstIndex(of: 0x0A) else {
            return bytes.count < 107 ? .incomplete : .invalid("a version 1 header longer than 107 bytes")
        }
        guard newline > 0, bytes[newline - 1] == 0x0D else { return .invalid("a version 1 header not ended by CRLF") }
        let line = String(decoding: bytes[..<(newline - 1)], as: UTF8.self)
        let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        if fields.count >= 2, fields[1] == "UNKNOWN" { return .header(length: newline + 1, client: nil) }
        guard fields.count == 6, fields[1] == "TCP4" || fields[1] == "TCP6" else {
            return .invalid("a version 1 header needs TCP4 or TCP6, two addresses and two ports")
        }
        guard let address = NetworkAddress(literal: fields[2]), address.isIPv4 == (fields[1] == "TCP4"),
            NetworkAddress(literal: fields[3]) != nil,
            let port = Int(fields[4]), (0...65535).contains(port),
            let destination = Int(fields[5]), (0...65535).contains(destination)
        else { return .invalid("a version 1 header with an address or port that does not parse") }
        guard let client = try? SocketAddress(ipAddress: fields[2], port: port) else {
            return .invalid("a version 1 header with an address that does not parse")
        }
        return .header(length: newline + 1, client: client)
    }

    private static func parseV2(_ bytes: [UInt8], available: Int) -> ProxyHeader {
        guard available >= 16 else { return .incomplete }
        let versionCommand = bytes[12]
        guard versionCommand >> 4 == 2 else {
            return .invalid("a version 2 signature with version \(versionCommand >> 4)")
        }
        let length = Int(bytes[14]) << 8 | Int(bytes[15])
        guard 16 + length <= maximumLength else {
            return .invalid("a version 2 header of \(16 + length) bytes, more than \(maximumLength)")
        }
        guard available >= 16 + length else { return .incomplete }
        let total = 16 + length
        switch versionCommand & 0x0F {
        case 0x0:  // LOCAL: the balancer's own connection (a health check)
            return .header(length: total, client: nil)
        case 0x1:  // PROXY
            break
        default:
            return .invalid("a version 2 header with command \(versionCommand & 0x0F)")
        }
        let body = bytes[16..<total]
        func port(_ offset: Int) -> Int {
            Int(body[body.startIndex + offset]) << 8 | Int(body[body.startIndex + offset + 1])
        }
        switch bytes[13] >> 4 {
        case 0x1:  // AF_INET: source, destination, source port, destination port
            guard length >= 12 else { return .invalid("a version 2 IPv4 header shorter than its addresses") }
            let source = body.prefix(4).map(String.init).joined(separator: ".")
            guard let client = try? SocketAddress(ipAddress: source, port: port(8)) else {
                return .invalid("a version 2 header with an IPv4 address that does not parse")
            }
            return .header(length: total, client: client)
        case 0x2:  // AF_INET6
            guard length >= 36 else { return .invalid("a version 2 IPv6 header shorter than its addresses") }
            let source = stride(from: 0, to: 16, by: 2).map { offset in
                String(Int(body[body.startIndex + offset]) << 8 | Int(body[body.startIndex + offset + 1]), radix: 16)
            }.joined(separator: ":")
            guard let client = try? SocketAddress(ipAddress: source, port: port(32)) else {
                return .invalid("a version 2 header with an IPv6 address that does not parse")
            }
            return .header(length: total, client: client)
        default:  // unspecified or a Unix socket: no client address to tell
            return .header(length: total, client: nil)
        }
    }
}

/// The client addresses PROXY protocol headers named, by connection: a request's context (HTTP/1.1 on
/// Hummingbird's channel, HTTP/2 on the engine) is made from its channel alone, so the address waits here from
/// the header until the connection closes. At most one entry per open connection.
final class ProxiedPeers: Sendable {
    static let shared = ProxiedPeers()

    private let addresses = Mutex([ObjectIdentifier: SocketAddress]())

    func set(_ address: SocketAddress, for channel: any Channel) {
        let key = ObjectIdentifier(channel)
        addresses.withLock { $0[key] = address }
        channel.closeFuture.whenComplete { [self] _ in _ = addresses.withLock { $0.removeValue(forKey: key) } }
    }

    /// The client the connection's PROXY header named, or its peer.
    func address(of channel: any Channel) -> SocketAddress? {
        addresses.withLock { $0[ObjectIdentifier(channel)] } ?? channel.remoteAddress
    }

    var count: Int { addresses.withLock { $0.count } }
}

/// Told down the pipeline when a PROXY header named the connection's client: the connection guard counts the
/// connection under the client's address from then on.
struct ProxiedClient {
    let address: SocketAddress
}

/// First on an HTTPS connection when `proxyProtocol` is on. From a trusted proxy it reads the PROXY header (and
/// nothing reaches TLS before it), records the client it names and steps aside; a trusted proxy's connection
/// without a valid header is closed. Other peers connect directly and are passed through untouched. A header that
/// stalls is cut off by the connection guard's handshake deadline; one longer than `ProxyHeader.maximumLength` is
/// refused.
final class ProxyProtocolHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum Mode {
        case undecided
        case expecting(ByteBuffer?)
        case passing
        case refused
    }

    private let trustedProxies: [NetworkRange]
    private let logger: Logger
    private var mode = Mode.undecided

    init(trustedProxies: [NetworkRange], logger: Logger) {
        self.trustedProxies = trustedProxies
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Decided at the first bytes: only then does it matter who the peer is.
        if case .undecided = mode {
            let trusted = ClientAddress.isTrustedProxy(context.channel.remoteAddress, trustedProxies)
            mode = trusted ? .expecting(nil) : .passing
        }
        if case .refused = mode { return }
        guard case .expecting(var buffered) = mode else {
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        var bytes = unwrapInboundIn(data)
        if buffered == nil {
            buffered = bytes
        } else {
            buffered!.writeBuffer(&bytes)
        }
        guard let received = buffered else { return }
        switch ProxyHeader.parse(received) {
        case .incomplete:
            mode = .expecting(received)
        case .invalid(let reason):
            mode = .refused
            logger.notice(
                "closing a connection from a trusted proxy: \(reason)",
                metadata: ["peer": "\(context.channel.remoteAddress.map { "\($0)" } ?? "-")"]
            )
            context.close(promise: nil)
        case .header(let length, let client):
            mode = .passing
            var rest = received
            rest.moveReaderIndex(forwardBy: length)
            if let client {
                ProxiedPeers.shared.set(client, for: context.channel)
                context.fireUserInboundEventTriggered(ProxiedClient(address: client))
            }
            if rest.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(rest)) }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }
}
