import Engine
import Foundation
import Prometheus
import Synchronization

/// The metrics registry of one broker, with the factory the engine records through.
public struct MetricsSetup: Sendable {
    public let registry: PrometheusCollectorRegistry
    public let metrics: BrokerMetrics

    public init() {
        registry = PrometheusCollectorRegistry()
        metrics = BrokerMetrics(factory: PrometheusMetricsFactory(registry: registry))
    }
}

/// Sets the gauges that describe live state (queue depths, connections, memory, lag) just before a scrape, and
/// turns the APNs pools' running totals into counters.
final class MetricsCollector: Sendable {
    let metrics: BrokerMetrics
    let gateway: PushGateway?
    let transport: APNsPushTransport?
    let scheduler: Scheduler?
    /// The store when several nodes share it; `nodeID` labels `broker_node_info`.
    let shared: (any SharedStore)?
    let nodeID: String
    /// The REST listener's certificate (nil: none to report).
    let tls: ServerTLS?
    /// Where `broker store backup --into` records its last success (an embedded deployment's data directory).
    let backupStatus: String?
    /// The tenants and the webhook outbox, for the per-tenant series alerts rely on.
    let tenants: (any TenantStore & WebhookStore)?
    let fcm: FCMPushTransport?
    let readiness: Readiness?
    /// The data directory, whose file system's free space is exported.
    let dataDirectory: String?
    private let seen = Mutex(Seen())

    struct Seen {
        var totals: [ObjectIdentifier: (connects: Int, goAways: Int)] = [:]
    }

    init(
        metrics: BrokerMetrics,
        gateway: PushGateway?,
        transport: APNsPushTransport?,
        scheduler: Scheduler?,
        store: any ChangeFeedStore,
        tls: ServerTLS? = nil,
        backupStatus: String? = nil,
        tenants: (any TenantStore & WebhookStore)? = nil,
        fcm: FCMPushTransport? = nil,
        readiness: Readiness? = nil,
        dataDirectory: String? = nil
    ) {
        self.tls = tls
        self.backupStatus = backupStatus
        self.tenants = tenants
        self.fcm = fcm
        self.readiness = readiness
        self.dataDirectory = dataDirectory
        self.metrics = metrics
        self.gateway = gateway
        self.transport = transport
        self.scheduler = scheduler
        self.shared = store as? any SharedStore
        self.nodeID = store.nodeID
    }

    func refresh() async {
        typealias Name = BrokerMetrics.Name
        await refreshTenants()
        metrics.gauge(Name.buildInfo, [("version", BrokerBuild.version), ("schema", BrokerBuild.schema)]).record(1)
        if let readiness {
            metrics.gauge(Name.ready).record(await readiness.problem() == nil ? 1 : 0)
        }
        if let dataDirectory, let space = Self.fileSystemSpace(dataDirectory) {
            metrics.gauge(Name.dataFreeBytes).record(space.free)
            metrics.gauge(Name.dataSizeBytes).record(space.size)
        }
        if let snapshot = await gateway?.snapshot() {
            // Every tenant the gateway has queued for, 0 when its queue is empty.
            for (tenant, depth) in snapshot.queued {
                metrics.gauge(Name.queueDepth, [("tenant", metrics.tenantLabel(tenant))]).record(depth)
            }
            metrics.gauge(Name.pushesInFlight).record(snapshot.inFlight)
        }
        for pool in transport?.pools ?? [] {
            let labels = [
                ("identity", pool.tenant.map { metrics.tenantLabel($0) } ?? "default"),
                ("environment", pool.environment.rawValue),
            ]
            let connections = await pool.client.snapshot()
            metrics.gauge(Name.apnsConnections, labels).record(connections.filter(\.open).count)
            metrics.gauge(Name.apnsStreamsInFlight, labels).record(connections.map(\.inFlight).reduce(0, +))
            metrics.gauge(Name.apnsStreamLimit, labels).record(connections.map { Int($0.maxStreams) }.reduce(0, +))
            let counters = await pool.client.counters
            let previous = seen.withLock { seen in
                let id = ObjectIdentifier(pool.client)
                defer { seen.totals[id] = (counters.connectionsOpened, counters.goAways) }
                return seen.totals[id] ?? (0, 0)
            }
            metrics.counter(Name.apnsConnects, labels).increment(
                by: max(0, counters.connectionsOpened - previous.connects)
            )
            metrics.counter(Name.apnsGoAways, labels).increment(by: max(0, counters.goAways - previous.goAways))
        }
        if let scheduler, let lag = try? await scheduler.lag() {
            metrics.gauge(Name.schedulerLag).record(lag.lagSeconds)
        }
        if let rss = Self.residentMemory() { metrics.gauge(Name.residentMemory).record(rss) }
        metrics.gauge(Name.nodeInfo, [("node", nodeID)]).record(1)
        // Expiry times, for alerts well before the day a certificate stops working: the REST certificate that new
        // connections are served (a pair on disk that did not load must not look renewed).
        if let last = backupStatus.flatMap(Self.lastBackup) {
            metrics.gauge(Name.backupLastSuccess).record(last.timeIntervalSince1970)
        }
        if let expiry = tls?.servedExpiry {
            metrics.gauge(Name.tlsCertificateExpiry).record(expiry.timeIntervalSince1970)
        }
        for (tenant, expiry) in transport?.certificateExpiries ?? [] {
            metrics.gauge(
                Name.apnsCertificateExpiry,
                [("identity", tenant.map { metrics.tenantLabel($0) } ?? "default")]
            )
            .record(expiry.timeIntervalSince1970)
        }
        if let state = try? await shared?.sharedState() {
            metrics.gauge(Name.storeClaims).record(state.claims)
            metrics.gauge(Name.storeLeases).record(state.leases)
            metrics.gauge(Name.storePoolInUse).record(state.poolInUse)
            metrics.gauge(Name.storePoolWaiting).record(state.poolWaiting)
        }
    }

    /// Resident set size from `/proc/self/statm` (Linux), in bytes.
    static func residentMemory() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The last good backup's time from `broker store backup --into`'s status file (nil: none yet, or unreadable).
    static func lastBackup(_ path: String) -> Date? {
        guard let data = FileManager.default.contents(atPath: path),
            let status = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let seconds = (status["lastSuccess"] as? NSNumber)?.doubleValue
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Per tenant and channel, whatever the tenant did since the start: whether the channel refuses its credential
    /// (its pushes there are paused), and the push counters an alert's rate needs, at 0 from the first scrape (a
    /// counter that first appears at its final value has no rate, and a series that does not exist makes an `and`
    /// empty). Per tenant, the webhook events waiting, and whether learned delivery times fell back.
    private func refreshTenants() async {
        typealias Name = BrokerMetrics.Name
        guard let tenants, let all = try? await tenants.tenants() else { return }
        let paused = await gateway?.snapshot().paused ?? [:]
        var channels: [PushChannel] = []
        if transport != nil { channels.append(.apns) }
        if fcm != nil { channels.append(.fcm) }
        if gateway == nil { channels = [] }
        for tenant in all {
            let label = metrics.tenantLabel(tenant.id)
            for channel in channels {
                let refused =
                    switch channel {
                    case .apns: paused[tenant.id] != nil
                    case .fcm: fcm?.failure(tenant: tenant.id) != nil
                    }
                metrics.gauge(Name.credentialRefused, [("tenant", label), ("channel", channel.rawValue)])
                    .record(refused ? 1 : 0)
                for outcome in ["accepted", "transport_failure"] {
                    metrics.counter(
                        Name.pushes,
                        [("tenant", label), ("channel", channel.rawValue), ("outcome", outcome), ("reason", "")]
                    ).increment(by: 0)
                }
            }
            // 1 while the safety valve keeps a tenant that learns delivery times on stated times (0: learning).
            if tenant.learnedTiming.enabled {
                metrics.gauge(Name.learnedTimingFallback, [("tenant", label)])
                    .record(tenant.learnedTiming.fallback == nil ? 0 : 1)
            }
            if let pending = try? await tenants.pendingWebhookEvents(tenant: tenant.id) {
                metrics.gauge(Name.webhookOutboxPending, [("tenant", label)]).record(pending.values.reduce(0, +))
            }
        }
    }

    /// The free and total bytes of the file system `path` is on.
    static func fileSystemSpace(_ path: String) -> (free: Int, size: Int)? {
        var stats = statvfs()
        guard statvfs(path, &stats) == 0 else { return nil }
        let block = Int(stats.f_frsize)
        return (Int(stats.f_bavail) * block, Int(stats.f_blocks) * block)
    }
}
