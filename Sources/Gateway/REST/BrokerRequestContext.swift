import Hummingbird
import NIOCore

/// The REST API's request context: Hummingbird's basic one plus the client's address (for throttling failed
/// logins per address).
public struct BrokerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// Set when the HTTP/2 engine admitted the request already (`AdmissionControl`): the middleware does not
    /// count it again.
    var admitted = false

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
