import Hummingbird
import NIOCore

/// The REST API's request context: Hummingbird's basic one plus the client's address (for throttling failed
/// logins per address): the connection's peer, or the client its PROXY protocol header named.
public struct BrokerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// Set when the HTTP/2 engine admitted the request already (`AdmissionControl`): the middleware does not
    /// count it again.
    var admitted = false
    /// The connection's event loop, and the executor that runs tasks on it (HTTP/2 requests run there): work
    /// the request starts stays on that thread.
    let eventLoop: any EventLoop
    var executor: (any TaskExecutor)?
    /// Whether the request came over HTTP/2 (the libnghttp2 engine): its body, unless streamed, is whole already.
    var http2 = false
    /// The connection (an HTTP/1.1 connection is asked to close after a late body's answer).
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = ProxiedPeers.shared.address(of: source.channel)
        eventLoop = source.channel.eventLoop
        channel = source.channel
    }
}
