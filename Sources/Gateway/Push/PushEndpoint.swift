import NIOSSL

/// Where a push service is (an APNs environment, FCM, or a simulator of either), and how to trust it.
public struct PushEndpoint: Sendable {
    public var host: String
    public var port: Int
    public var tls: TLSConfiguration
    public var serverHostname: String?

    public init(
        host: String,
        port: Int,
        tls: TLSConfiguration = .makeClientConfiguration(),
        serverHostname: String? = nil
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.serverHostname = serverHostname
    }

    /// APNs' production environment.
    public static let production = PushEndpoint(host: "api.push.apple.com", port: 443)
    /// APNs' sandbox environment.
    public static let sandbox = PushEndpoint(host: "api.sandbox.push.apple.com", port: 443)
    /// FCM's HTTP v1 API.
    public static let fcm = PushEndpoint(host: "fcm.googleapis.com", port: 443)
}

public typealias APNsEndpoint = PushEndpoint

extension HTTP2PushClientConfiguration {
    /// A pool's configuration for an endpoint, with the defaults.
    public init(_ endpoint: PushEndpoint) {
        self.init(host: endpoint.host, port: endpoint.port, tls: endpoint.tls, serverHostname: endpoint.serverHostname)
    }
}
