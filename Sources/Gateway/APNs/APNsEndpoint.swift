import NIOSSL

/// Where one APNs environment is, and how to trust it.
public struct APNsEndpoint: Sendable {
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

    public static let production = APNsEndpoint(host: "api.push.apple.com", port: 443)
    public static let sandbox = APNsEndpoint(host: "api.sandbox.push.apple.com", port: 443)
}
