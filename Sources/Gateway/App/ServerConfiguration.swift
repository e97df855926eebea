import Engine

/// A listening address.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (`[::1]:8443` for IPv6).
    public init(parsing text: String) throws(EngineError) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { throw EngineError(.invalidInput, "listen address must be host:port, got '\(text.prefix(80))'") }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw EngineError(.invalidInput, "listen address needs a host") }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Configuration of the broker's network edges and their wiring.
public struct ServerConfiguration: Sendable {
    /// Folder for the generated certificate (and, on the embedded default, the database and media).
    public var dataDirectory: String
    /// The HTTPS listener (ALPN `h2` and `http/1.1`).
    public var listen: ListenAddress
    /// An optional plain HTTP/1.1 listener for use behind a TLS-terminating proxy.
    public var plainListen: ListenAddress?
    /// PEM files; when both are nil a self-signed pair is generated into the data directory.
    public var tlsCertificatePath: String?
    public var tlsPrivateKeyPath: String?
    /// Host names the self-signed certificate is issued for.
    public var selfSignedHostnames: [String]
    /// The tenant served on the original, unprefixed paths.
    public var defaultTenant: TenantID?
    /// HTTP/1.1 header limits (HTTP/2 uses the stack's own: 16 KiB header list, 100 concurrent streams).
    public var maxHeaderListSize: Int
    public var maxHeaderFieldCount: Int
    /// How often the change feed (writes by admin commands and other nodes) is read.
    public var changeFeedInterval: Duration
    /// How long a closing connection may take to finish its requests on shutdown.
    public var gracefulCloseTimeout: Duration
    /// How often the REST certificate's files are looked at for a change (SIGHUP reloads them at once).
    public var tlsReloadInterval: Duration = .seconds(10)
    public var idleTimeout: Duration
    /// The HTTPS listener's connection bounds and handshake deadlines.
    public var connectionLimits: ConnectionLimits
    /// How long a graceful shutdown (SIGTERM) may take before what is left is cancelled.
    public var shutdownGracePeriod: Duration
    /// After the grace period, how long the cancelled services may take to unwind before the process is stopped
    /// with a fatal error (ServiceLifecycle's rule). A loaded machine needs seconds for it.
    public var cancellationGracePeriod: Duration = .seconds(10)
    public var rest: RESTConfiguration
    public var ledger: LedgerConfiguration
    /// Where pushes go (the embedded simulator by default).
    public var apns: APNsSetup
    /// Where Android pushes go (none by default; the embedded simulator's FCM side with the embedded default).
    public var fcm: FCMSetup = .disabled
    /// The 32-byte key uploaded APNs credentials are sealed with (AES-256-GCM); nil refuses uploads.
    public var credentialKey: [UInt8]? = nil
    public var push: PushGatewayConfiguration
    /// The daily dispatch; nil runs no scheduler (a node that only serves REST).
    public var scheduler: SchedulerConfiguration?
    /// The operator's listener (`/metrics`, `/inspect`); nil runs none.
    public var admin: AdminConfiguration?
    /// Tenants' webhooks: where endpoints may point and how events are sent.
    public var webhooks = WebhookConfiguration()

    public init(
        dataDirectory: String,
        listen: ListenAddress = ListenAddress(host: "0.0.0.0", port: 8443),
        plainListen: ListenAddress? = nil,
        tlsCertificatePath: String? = nil,
        tlsPrivateKeyPath: String? = nil,
        selfSignedHostnames: [String] = ["localhost"],
        defaultTenant: TenantID? = nil,
        maxHeaderListSize: Int = 16 * 1024,
        maxHeaderFieldCount: Int = 100,
        changeFeedInterval: Duration = .seconds(1),
        gracefulCloseTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(120),
        connectionLimits: ConnectionLimits = ConnectionLimits(),
        shutdownGracePeriod: Duration = .seconds(20),
        rest: RESTConfiguration = .init(),
        ledger: LedgerConfiguration = .init(),
        apns: APNsSetup = .embeddedSimulator(),
        push: PushGatewayConfiguration = .init(),
        scheduler: SchedulerConfiguration? = .init(),
        admin: AdminConfiguration? = nil
    ) {
        self.dataDirectory = dataDirectory
        self.listen = listen
        self.plainListen = plainListen
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsPrivateKeyPath = tlsPrivateKeyPath
        self.selfSignedHostnames = selfSignedHostnames
        self.defaultTenant = defaultTenant
        self.maxHeaderListSize = maxHeaderListSize
        self.maxHeaderFieldCount = maxHeaderFieldCount
        self.changeFeedInterval = changeFeedInterval
        self.gracefulCloseTimeout = gracefulCloseTimeout
        self.idleTimeout = idleTimeout
        self.connectionLimits = connectionLimits
        self.shutdownGracePeriod = shutdownGracePeriod
        self.rest = rest
        self.ledger = ledger
        self.apns = apns
        self.push = push
        self.scheduler = scheduler
        self.admin = admin
    }
}
