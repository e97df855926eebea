import Hummingbird
import NIOCore

/// The REST API's request context: Hummingbird's basic one plus the client's address (for throttling failed
/// logins per address).
public struct BrokerRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
