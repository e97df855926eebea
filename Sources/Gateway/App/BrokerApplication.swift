import Engine
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Which listener reported its address.
public enum Listener: Sendable {
    case https, plain, admin
}

/// The running broker: its actors and its listeners, as one service.
public struct BrokerApplication: Service {
    public let store: any BrokerStore
    public let ledger: DeliveryLedger
    public let registry: TokenRegistry
    /// Nil when pushes are disabled.
    public let pushGateway: PushGateway?
    /// The in-process APNs simulator of the embedded default.
    public let simulator: APNsSimulator?
    /// The APNs transport (nil when pushes are disabled).
    public let transport: APNsPushTransport?
    /// Nil when the configuration runs no scheduler.
    public let scheduler: Scheduler?
    public let metrics: MetricsSetup
    /// Every operation the REST listeners serve (the OpenAPI document describes exactly these).
    public let routes: RouteCatalog
    /// The REST listeners' admission control: how many requests are in progress (tests wait on it).
    let admission: AdmissionControl
    let group: ServiceGroup
    let shutdown: ShutdownNotice

    /// Runs every service until a graceful shutdown (a signal or ``shutdown()``) has stopped them all.
    public func run() async throws {
        defer { shutdown.stopped() }  // also when the group ends with a service's error
        try await group.run()
    }

    /// Stops the services as a shutdown signal would: in reverse order, each one gracefully (the listeners send
    /// GOAWAY and finish their requests, the gateway flushes its outcomes). `run()` returns when they have.
    /// Cancelling `run()`'s task instead stops them abruptly, and the HTTP servers log the cancellation as errors.
    public func shutdown() async {
        await group.triggerGracefulShutdown()
    }
}

/// Wires the Engine actors to the HTTP edges. `main` and the tests both build the broker through here.
///
/// Services start in order and stop in reverse: the change feed first, the listeners last, so the HTTP
/// servers stop taking requests before anything they call goes away.
public func buildApplication(
    configuration: ServerConfiguration,
    store: any BrokerStore,
    logger: Logger,
    metrics: MetricsSetup = MetricsSetup(),
    gracefulShutdownSignals: [UnixSignal] = [],
    onListening: @escaping @Sendable (Listener, Int) async -> Void = { _, _ in }
) async throws -> BrokerApplication {
    // The one cache of tenants and impulses: the ledger's pages, the scheduler, the push gateway and every
    // request's tenant read it, and one `forget` (CacheInvalidation) refreshes it for all of them.
    let ledger = DeliveryLedger(
        store: store,
        catalog: CatalogCache(store: store),
        configuration: configuration.ledger,
        metrics: metrics.metrics,
        logger: logger
    )
    let registry = TokenRegistry(store: store, logger: logger, metrics: metrics.metrics)
    let authenticator = Authenticator(store: store, configuration: configuration.rest)
    let push = try await PushStack.make(
        configuration.apns,
        fcm: configuration.fcm,
        configuration: configuration.push,
        store: store,
        ledger: ledger,
        registry: registry,
        tokenStore: store,
        logger: logger,
        metrics: metrics.metrics
    )
    let scheduler = configuration.scheduler.map {
        Scheduler(
            store: store,
            ledger: ledger,
            gateway: push.gateway,
            configuration: $0,
            logger: logger,
            metrics: metrics.metrics
        )
    }
    let inspector = Inspector(
        store: store,
        gateway: push.gateway,
        transport: push.transport,
        fcm: push.fcm,
        scheduler: scheduler
    )
    let tenants = TenantDirectory(catalog: ledger.catalog, defaultTenant: configuration.defaultTenant)
    let vault = APNsCredentialVault(key: configuration.credentialKey)
    let credentials: APNsCredentialLoader? =
        push.transport == nil && push.fcm == nil
        ? nil
        : APNsCredentialLoader(
            store: store,
            vault: vault,
            transport: push.transport,
            fcm: push.fcm,
            gateway: push.gateway,
            logger: logger
        )
    try await credentials?.loadAll()
    let caches = CacheInvalidation(
        authenticator: authenticator,
        ledger: ledger,
        gateway: push.gateway,
        credentials: credentials
    )
    // iPhones are always taken (without a transport their deliveries are recorded, not pushed); Android devices
    // only when FCM is configured.
    var restConfiguration = configuration.rest
    restConfiguration.pushChannels = push.fcm == nil ? [.apns] : [.apns, .fcm]
    var rest = RESTAPI(
        tenants: tenants,
        authenticator: authenticator,
        ledger: ledger,
        registry: registry,
        store: store,
        configuration: restConfiguration,
        pushGateway: push.gateway,
        metrics: metrics.metrics,
        inspector: inspector
    )
    // New password hashes on threads of their own, in the tenants' turns.
    let hashing = PasswordHashing(cost: configuration.rest.bcryptCost)
    let administration = Administration(
        store: store,
        hashPassword: { try await hashing.hash($0, tenant: $1) }
    )
    let adminAuthenticator = AdminAuthenticator(
        users: authenticator,
        store: store,
        operatorToken: configuration.rest.operatorToken
    )
    let console = try Console(
        administration: administration,
        authenticator: adminAuthenticator,
        tenants: tenants,
        store: store,
        caches: caches,
        configuration: configuration.rest,
        inspector: inspector,
        vault: vault,
        webhookPolicy: configuration.webhooks.policy
    )
    let adminAPI = AdminAPI(
        administration: administration,
        authenticator: adminAuthenticator,
        tenants: tenants,
        caches: caches,
        vault: vault,
        idempotency: Idempotency(store: store, maxBodySize: configuration.rest.maxBodySize),
        webhooks: configuration.webhooks.policy
    )
    // The application mounts the admin API and the console on the REST server; /SendPush delivers through the
    // same administration.
    rest.mounts = [adminAPI, console]
    rest.administration = administration
    let api = rest
    // The contract is part of the build: a broker without it does not start.
    _ = try OpenAPIDocument.bytes.get()
    let tls = try TLSFiles.configuredOrSelfSigned(
        certificatePath: configuration.tlsCertificatePath,
        privateKeyPath: configuration.tlsPrivateKeyPath,
        directory: configuration.dataDirectory,
        hostnames: configuration.selfSignedHostnames,
        logger: logger
    )
    let serverTLS = try ServerTLS(files: tls)
    let streamConfiguration = HTTP1Channel.Configuration(
        additionalChannelHandlers: [ParserErrorProblem()],
        idleTimeout: .seconds(Int64(configuration.idleTimeout.components.seconds)),
        httpDecoderConfiguration: .init(
            maxHeaderFieldSize: configuration.maxHeaderListSize,
            maxHeaderListSize: configuration.maxHeaderListSize,
            maxHeaderFieldCount: configuration.maxHeaderFieldCount
        )
    )
    var services: [any Service] = []
    // First, so that it stops last: its own claims and leases are handed back once the pushes have drained.
    if let membership = store as? any NodeMembership {
        services.append(
            NodeHeartbeat(membership: membership, dataDirectory: configuration.dataDirectory, logger: logger) {
                scheduler?.sweepSoon()
            }
        )
    }
    services += [
        ChangeFeedFollower(
            store: store,
            caches: caches,
            interval: configuration.changeFeedInterval,
            retention: .seconds(600),
            logger: logger
        ),
        PushService(stack: push),
    ]
    if let scheduler { services.append(SchedulerService(scheduler: scheduler)) }
    if scheduler != nil {
        services.append(
            LearnedTimingGuardService(guardian: LearnedTimingGuardian(store: store, logger: logger))
        )
    }
    services.append(try WebhookDispatcher(store: store, configuration: configuration.webhooks, logger: logger))
    if let admin = configuration.admin {
        let routes = AdminRoutes(
            registry: metrics.registry,
            collector: MetricsCollector(
                metrics: metrics.metrics,
                gateway: push.gateway,
                transport: push.transport,
                scheduler: scheduler,
                store: store,
                tls: serverTLS,
                backupStatus: configuration.dataDirectory + "/backup-status.json",
                tenants: store,
                fcm: push.fcm,
                readiness: api.readiness,
                dataDirectory: configuration.dataDirectory
            ),
            inspector: inspector,
            readiness: api.readiness,
            token: admin.token
        )
        services.append(
            Application(
                router: routes.router(),
                server: .http1(),
                configuration: .init(address: .hostname(admin.listen.host, port: admin.listen.port), serverName: nil),
                onServerRunning: { channel in await onListening(.admin, channel.localAddress?.port ?? 0) },
                logger: logger
            )
        )
    }
    let httpsRouter = api.router(scheme: "https")
    let httpsResponder = httpsRouter.buildResponder()
    // HTTP/2 on the libnghttp2 engine, HTTP/1.1 on Hummingbird's channel; both answer through this router.
    let restServer = HTTPServerBuilder { responder in
        try RESTChannel(
            tls: serverTLS,
            http1: HTTP1Channel(responder: responder, configuration: streamConfiguration),
            router: httpsResponder,
            idleTimeout: configuration.idleTimeout,
            gracefulCloseTimeout: configuration.gracefulCloseTimeout,
            maximumBodySize: configuration.rest.maxBodySize + 1,
            streamsBody: StreamedRoutes.matches,
            streamedBodySize: configuration.rest.maxUploadSize,
            maxHeaderListSize: configuration.maxHeaderListSize,
            connectionLimits: configuration.connectionLimits,
            admission: api.admission,
            trustedProxies: configuration.rest.trustedProxies,
            proxyProtocol: configuration.rest.proxyProtocol
        )
    }
    let https = Application(
        router: httpsRouter,
        server: restServer,
        configuration: .init(
            address: .hostname(configuration.listen.host, port: configuration.listen.port),
            serverName: nil
        ),
        onServerRunning: { channel in await onListening(.https, channel.localAddress?.port ?? 0) },
        logger: logger
    )
    services.append(https)
    services.append(TLSReloader(tls: serverTLS, interval: configuration.tlsReloadInterval, logger: logger))
    if let plain = configuration.plainListen {
        services.append(
            Application(
                router: api.router(scheme: "http"),
                server: .http1(configuration: streamConfiguration),
                configuration: .init(address: .hostname(plain.host, port: plain.port), serverName: nil),
                onServerRunning: { channel in await onListening(.plain, channel.localAddress?.port ?? 0) },
                logger: logger
            )
        )
    }
    // Last, so that it hears a shutdown first.
    let shutdown = ShutdownNotice(
        logger: logger,
        gracePeriod: configuration.shutdownGracePeriod,
        readiness: api.readiness
    )
    services.append(shutdown)
    var groupConfiguration = ServiceGroupConfiguration(
        services: services.map { .init(service: $0) },
        gracefulShutdownSignals: gracefulShutdownSignals,
        cancellationSignals: [],
        logger: logger
    )
    // After the grace period the remaining services are cancelled: pushes still in flight are handed back
    // (unsettled in the ledger, pushed at the next start).
    groupConfiguration.maximumGracefulShutdownDuration = configuration.shutdownGracePeriod
    groupConfiguration.maximumCancellationDuration = configuration.cancellationGracePeriod
    let group = ServiceGroup(configuration: groupConfiguration)
    return BrokerApplication(
        store: store,
        ledger: ledger,
        registry: registry,
        pushGateway: push.gateway,
        simulator: push.simulator,
        transport: push.transport,
        scheduler: scheduler,
        metrics: metrics,
        routes: api.routes,
        admission: rest.admission,
        group: group,
        shutdown: shutdown
    )
}

/// Logs a graceful shutdown's start and end. The services themselves stop silently (ServiceLifecycle logs at
/// debug level only), so without it an operator could not tell a clean stop from one cut short.
final class ShutdownNotice: Service, Sendable {
    let logger: Logger
    let gracePeriod: Duration
    private let began = Mutex<ContinuousClock.Instant?>(nil)

    /// Answers not ready from the start of a graceful stop.
    let readiness: Readiness?

    init(logger: Logger, gracePeriod: Duration, readiness: Readiness? = nil) {
        self.logger = logger
        self.gracePeriod = gracePeriod
        self.readiness = readiness
    }

    func run() async throws {
        do { try await gracefulShutdown() } catch { return }  // cancelled: no graceful shutdown to report
        began.withLock { $0 = .now }
        readiness?.stopping()
        logger.notice(
            "shutting down: the scheduler stops, pushes in flight finish, the listeners close",
            metadata: ["grace_period_s": "\(gracePeriod.components.seconds)"]
        )
    }

    /// Called when every service has stopped. A shutdown that outlasted the grace period was cut short: the
    /// remaining services were cancelled, and their pushes stay unsettled in the ledger for the next start.
    func stopped() {
        guard let began = began.withLock({ $0 }) else { return }
        let took = began.duration(to: .now)
        let metadata: Logger.Metadata = ["shutdown_ms": "\(Int(took / .milliseconds(1)))"]
        if took >= gracePeriod {
            logger.warning(
                "stopped after the grace period ran out: unfinished pushes stay unsettled and go out at the next start",
                metadata: metadata
            )
        } else {
            logger.notice("stopped", metadata: metadata)
        }
    }
}
