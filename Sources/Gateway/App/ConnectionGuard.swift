import Engine
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization

/// Bounds on a listener's connections, so that clients that connect and never speak cannot use up the process's
/// file descriptors.
public struct ConnectionLimits: Sendable {
    /// Open connections on the listener at most; more are closed as soon as they are accepted.
    public var maxConnections: Int
    /// Open connections from one client address (IPv4 address, IPv6 /64) at most; never more than a quarter of
    /// `maxConnections` (``addressShare``), so that one address cannot take every slot of a listener whose open-file
    /// limit cut it down.
    public var maxConnectionsPerAddress: Int
    /// From accept to a completed TLS handshake.
    public var handshakeTimeout: Duration
    /// From accept to the first bytes after the handshake (a connection that never asks for anything).
    public var firstRequestTimeout: Duration
    /// HTTP/2: a connection whose client lets none of its queued answers out for this long (a window held at
    /// zero) is closed.
    public var stallTimeout: Duration

    public init(
        maxConnections: Int = 10_000,
        maxConnectionsPerAddress: Int = 1_000,
        handshakeTimeout: Duration = .seconds(10),
        firstRequestTimeout: Duration = .seconds(30),
        stallTimeout: Duration = .seconds(30)
    ) {
        self.maxConnections = max(1, maxConnections)
        self.maxConnectionsPerAddress = max(1, maxConnectionsPerAddress)
        self.handshakeTimeout = handshakeTimeout
        self.firstRequestTimeout = firstRequestTimeout
        self.stallTimeout = stallTimeout
    }

    /// One address's share of the listener's slots at most: the configured per-address bound, within a quarter of
    /// the total (a company's NAT still gets thousands of the default 10,000).
    public var addressShare: Int { min(maxConnectionsPerAddress, max(1, maxConnections / 4)) }

    /// The handshake deadline of a connection accepted while `open` connections are open: the configured one, cut
    /// to a fifth (at least a second) once three quarters of the slots are taken, so that connections that never
    /// finish their handshake free their slots sooner while the listener is under pressure.
    public func handshakeTimeout(open: Int) -> Duration {
        guard open * 4 >= maxConnections * 3 else { return handshakeTimeout }
        return max(.seconds(1), handshakeTimeout / 5)
    }
}

/// A listener's open connections, in total and per client address; and how many it refused.
final class ConnectionCounter: Sendable {
    private struct State {
        var total = 0
        var perAddress: [String: Int] = [:]
        var refused = 0
        var lastWarning: ContinuousClock.Instant?
    }

    let limits: ConnectionLimits
    let name: String
    private let state = Mutex(State())

    init(limits: ConnectionLimits, name: String) {
        self.limits = limits
        self.name = name
    }

    var open: Int { state.withLock { $0.total } }
    var refused: Int { state.withLock { $0.refused } }

    /// Counts a new connection, or refuses it (and says whether to log that now: once a minute at most).
    func admit(_ address: String?) -> (admitted: Bool, warn: Bool) {
        state.withLock { state in
            let fromAddress = address.map { state.perAddress[$0, default: 0] } ?? 0
            guard state.total < limits.maxConnections, fromAddress < limits.addressShare else {
                state.refused += 1
                let now = ContinuousClock.now
                let warn = state.lastWarning.map { $0.duration(to: now) >= .seconds(60) } ?? true
                if warn { state.lastWarning = now }
                return (false, warn)
            }
            state.total += 1
            if let address { state.perAddress[address, default: 0] += 1 }
            return (true, false)
        }
    }

    /// Counts a connection already admitted (without an address: a trusted proxy's) under its client's address
    /// from its PROXY header, or refuses it.
    func admitAddress(_ address: String) -> (admitted: Bool, warn: Bool) {
        state.withLock { state in
            guard state.perAddress[address, default: 0] < limits.addressShare else {
                state.refused += 1
                let now = ContinuousClock.now
                let warn = state.lastWarning.map { $0.duration(to: now) >= .seconds(60) } ?? true
                if warn { state.lastWarning = now }
                return (false, warn)
            }
            state.perAddress[address, default: 0] += 1
            return (true, false)
        }
    }

    func release(_ address: String?) {
        state.withLock { state in
            state.total -= 1
            guard let address, let count = state.perAddress[address] else { return }
            state.perAddress[address] = count > 1 ? count - 1 : nil
        }
    }
}

/// Sits right behind the TLS handler of an accepted connection: refuses the connection when its listener or its
/// address has no room, and closes it when its TLS handshake (and a PROXY header before it), or the first bytes
/// after it, do not come in time. A trusted proxy's connections carry many clients: they are not counted under the
/// proxy's address, only under the client's a PROXY header names.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let counter: ConnectionCounter
    private let trustedProxies: [NetworkRange]
    private let logger: Logger
    private var address: String?
    private var counted = false
    private var started = false
    private var handshakeTimer: Scheduled<Void>?
    private var firstRequestTimer: Scheduled<Void>?

    init(counter: ConnectionCounter, trustedProxies: [NetworkRange] = [], logger: Logger) {
        self.counter = counter
        self.trustedProxies = trustedProxies
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        let peer = context.channel.remoteAddress
        address = ClientAddress.isTrustedProxy(peer, trustedProxies) ? nil : peer.flatMap(ClientAddress.key)
        let (admitted, warn) = counter.admit(address)
        guard admitted else {
            refuse(context, warn: warn)
            return
        }
        counted = true
        let loop = context.eventLoop.assumeIsolated()
        let channel = context.channel
        let deadline = counter.limits.handshakeTimeout(open: counter.open)
        handshakeTimer = loop.scheduleTask(in: Self.timeAmount(deadline)) {
            channel.close(promise: nil)
        }
        firstRequestTimer = loop.scheduleTask(in: Self.timeAmount(counter.limits.firstRequestTimeout)) {
            channel.close(promise: nil)
        }
    }

    private func refuse(_ context: ChannelHandlerContext, warn: Bool) {
        if warn {
            logger.warning(
                "refusing connections: the listener or one client address has no room",
                metadata: [
                    "listener": "\(counter.name)", "connections.open": "\(counter.open)",
                    "connections.refused": "\(counter.refused)",
                ]
            )
        }
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let proxied = event as? ProxiedClient {
            // Counted without an address so far (a trusted proxy's connection): now under its client's.
            guard counted, address == nil, let key = ClientAddress.key(proxied.address) else { return }
            let (admitted, warn) = counter.admitAddress(key)
            guard admitted else {
                refuse(context, warn: warn)
                return
            }
            address = key
            return
        }
        if case .handshakeCompleted = event as? TLSUserEvent {
            handshakeTimer?.cancel()
            handshakeTimer = nil
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let timer = firstRequestTimer {
            timer.cancel()
            firstRequestTimer = nil
            // Without TLS (a cleartext listener) the first bytes end the handshake wait as well.
            handshakeTimer?.cancel()
            handshakeTimer = nil
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        handshakeTimer?.cancel()
        firstRequestTimer?.cancel()
        if counted {
            counted = false
            counter.release(address)
        }
        context.fireChannelInactive()
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(duration / .nanoseconds(1)))
    }
}

/// The part of a client's address its connections and failed logins are counted under: an IPv4 address, or the
/// /64 of an IPv6 one (one subscriber has a whole /64 to choose from).
enum ClientAddress {
    /// The client address a request's failed logins are throttled by: the peer on the HTTPS listener,
    /// `X-Forwarded-For` behind a trusted proxy, none otherwise (a proxy's address says nothing of its clients).
    static func of(
        _ request: Request,
        _ context: BrokerRequestContext,
        scheme: String,
        trustedProxies: [NetworkRange]
    ) -> String? {
        key(
            peer: context.remoteAddress,
            forwardedFor: request.headers[values: HTTPField.Name("X-Forwarded-For")!].joined(separator: ","),
            trustedProxies: trustedProxies,
            scheme: scheme
        )
    }

    /// The key login throttling counts a request's client by. The peer, on the HTTPS listener; behind a trusted
    /// proxy (`trustedProxies`), the right-most `X-Forwarded-For` entry that is not itself a trusted proxy (the
    /// left ones are whatever the client wrote). Nil when it is not known: the plain listener's peer is a proxy.
    static func key(
        peer: SocketAddress?,
        forwardedFor: String?,
        trustedProxies: [NetworkRange],
        scheme: String
    ) -> String? {
        if isTrustedProxy(peer, trustedProxies), let forwardedFor {
            let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            for hop in hops.reversed() {
                guard let address = NetworkAddress(literal: hop) else { return nil }
                if trustedProxies.contains(where: { $0.contains(address) }) { continue }
                return key(address)
            }
            return nil
        }
        return scheme == "https" ? peer.flatMap(key) : nil
    }

    /// Whether the peer is one of the trusted proxies (a load balancer, an ingress).
    static func isTrustedProxy(_ peer: SocketAddress?, _ trustedProxies: [NetworkRange]) -> Bool {
        guard !trustedProxies.isEmpty, let address = peer?.ipAddress.flatMap({ NetworkAddress(literal: $0) }) else {
            return false
        }
        return trustedProxies.contains { $0.contains(address) }
    }

    /// An IPv4 address, or an IPv6 address's /64 (one subscriber's network).
    static func key(_ address: NetworkAddress) -> String {
        guard !address.isIPv4 else { return address.description }
        return stride(from: 0, to: 8, by: 1).map { String(address.bytes[$0], radix: 16) }.joined(separator: ":")
            + "::/64"
    }

    static func key(_ address: SocketAddress) -> String? {
        switch address {
        case .v4: return address.ipAddress
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0.prefix(8)) }
            return bytes.map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
        default: return nil
        }
    }
}
