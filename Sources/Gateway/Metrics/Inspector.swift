import Engine
import Foundation

/// The live state of the actors, as `/inspect` shows it (and, for one tenant, `GET /v1/admin/inspect`).
public struct Inspector: Sendable {
    let store: any ChangeFeedStore & TenantStore
    let gateway: PushGateway?
    let transport: APNsPushTransport?
    let fcm: FCMPushTransport?
    let scheduler: Scheduler?

    init(
        store: any ChangeFeedStore & TenantStore,
        gateway: PushGateway?,
        transport: APNsPushTransport?,
        fcm: FCMPushTransport? = nil,
        scheduler: Scheduler?
    ) {
        self.store = store
        self.gateway = gateway
        self.transport = transport
        self.fcm = fcm
        self.scheduler = scheduler
    }
    let startedAt = Date()

    struct Connection: Encodable {
        var state: String
        var streamLimit: UInt32
        var streamsInFlight: Int
        var verified: Bool
    }

    struct APNsPool: Encodable {
        var identity: String
        var environment: String
        var connections: [Connection]
        var jwtAgeSeconds: Int?
        var pushesSent: Int
        var connectionsOpened: Int
        /// Connections lost to GOAWAY or a close.
        var goAways: Int
        /// Present while APNs cannot be reached: failed attempts in a row, for how long, the latest error.
        var unreachable: Unreachable?
    }

    /// The FCM pool a tenant's Android pushes go through.
    struct FCMPool: Encodable {
        var identity: String
        var project: String
        var connections: [Connection]
        var pushesSent: Int
        var connectionsOpened: Int
        var goAways: Int
        var unreachable: Unreachable?
        /// `usable`, or `failed` (FCM refused the service account: the tenant's Android pushes stop until it is
        /// replaced), with FCM's reason.
        var credential: String
        var credentialError: String?
        /// Present while FCM asked for a pause (429 or 503 with `Retry-After`): the seconds left.
        var pausedForSeconds: Int?
        /// Access tokens fetched since start.
        var tokenExchanges: Int
    }

    struct Unreachable: Encodable {
        var failedAttempts: Int
        var forSeconds: Int
        var lastError: String?
    }

    struct TenantView: Encodable {
        var tenant: String
        var queued: Int
        var configurationError: String?
        var apns: [APNsPool]
        var fcm: FCMPool?
        /// What APNs or FCM refused (or never answered) in the last hour, by kind, most recent first.
        var refusals: [Refusal]
    }

    struct Refusal: Encodable {
        var kind: String
        var count: Int
        var firstAt: String
        var lastAt: String
    }

    struct SchedulerView: Encodable {
        var nextDueAt: String?
        var lagSeconds: Double
        var statistics: [String: Int]
        /// Present while the dispatch is failing (the store): failures in a row, since when, the latest error.
        var failing: Failing?
    }

    struct Failing: Encodable {
        var consecutiveFailures: Int
        var since: String?
        var lastError: String?
    }

    /// The shared store (PostgreSQL) as this node sees it.
    struct DatabaseView: Encodable {
        var url: String
        var claims: Int
        var leases: Int
        var pool: [String: Int]
    }

    /// Whether this node's pushes get through (PushHealth): present while they fail with none accepted.
    struct PushingView: Encodable {
        var failingSince: String?
        /// When the node gave up and handed its work to the others (it holds, then probes).
        var gaveUpAt: String?
        var probing: Bool
    }

    struct View: Encodable {
        var node: String
        var pushing: PushingView?
        var database: DatabaseView?
        var uptimeSeconds: Int
        var pushesInFlight: Int?
        /// The configured ceiling of pushes in flight and the deliveries per gateway batch.
        var pushLimits: [String: Int]?
        var scheduler: SchedulerView?
        var tenants: [TenantView]
    }

    static func connections(
        _ snapshot: [(maxStreams: UInt32, inFlight: Int, verified: Bool, open: Bool)]
    ) -> [Connection] {
        snapshot.map {
            Connection(
                state: $0.open ? "open" : "draining",
                streamLimit: $0.maxStreams,
                streamsInFlight: $0.inFlight,
                verified: $0.verified
            )
        }
    }

    /// Present while the pool's service cannot be reached.
    static func unreachable(
        _ reachability: (failures: Int, since: ContinuousClock.Instant?, lastError: String?)
    ) -> Unreachable? {
        guard reachability.failures > 0 else { return nil }
        return Unreachable(
            failedAttempts: reachability.failures,
            forSeconds: Int((reachability.since?.duration(to: .now) ?? .zero).components.seconds),
            lastError: reachability.lastError
        )
    }

    /// Everything, or only `tenant`'s part (then nothing about other tenants, the node, or the shared scheduler).
    func view(tenant only: TenantID? = nil) async throws -> View {
        let snapshot = await gateway?.snapshot()
        let pools = transport?.pools ?? []
        let now = Date()
        var ids = Set(try await store.tenants().map(\.id))
        if let only { ids = ids.filter { $0 == only } }
        var tenants: [TenantView] = []
        for id in ids.sorted() {
            // A tenant's pushes use its own pool, or the default identity's pool shared with the others.
            let own = transport?.hasOwnIdentity(id) ?? false
            var views: [APNsPool] = []
            for pool in pools where pool.tenant == (own ? id : nil) {
                let connections = await pool.client.snapshot()
                let counters = await pool.client.counters
                let reachability = await pool.client.reachability
                views.append(
                    APNsPool(
                        identity: own ? "tenant" : "default",
                        environment: pool.environment.rawValue,
                        connections: Self.connections(connections),
                        jwtAgeSeconds: pool.tokenIssuedAt.map { Int(now.timeIntervalSince($0)) },
                        // The default pool's counters are shared: shown to a tenant only in the operator's view.
                        pushesSent: own || only == nil ? counters.sent : 0,
                        connectionsOpened: counters.connectionsOpened,
                        goAways: counters.goAways,
                        unreachable: Self.unreachable(reachability)
                    )
                )
            }
            var fcmView: FCMPool?
            if let pool = fcm?.poolView(tenant: id) {
                let connections = await pool.client.snapshot()
                let counters = await pool.client.counters
                let reachability = await pool.client.reachability
                let pause = await pool.client.pausedUntil.map { ContinuousClock.now.duration(to: $0) }
                fcmView = FCMPool(
                    identity: pool.identity,
                    project: pool.project,
                    connections: Self.connections(connections),
                    pushesSent: pool.identity != "default" || only == nil ? counters.sent : 0,
                    connectionsOpened: counters.connectionsOpened,
                    goAways: counters.goAways,
                    unreachable: Self.unreachable(reachability),
                    credential: pool.failed == nil ? "usable" : "failed",
                    credentialError: pool.failed,
                    pausedForSeconds: pause.map { Int($0.components.seconds) + 1 },
                    tokenExchanges: await pool.tokens.exchanges
                )
            }
            let refusals = await gateway?.recentRefusals(tenant: id) ?? []
            let format = ISO8601DateFormatter()
            tenants.append(
                TenantView(
                    tenant: id.rawValue,
                    queued: snapshot?.queued[id] ?? 0,
                    configurationError: snapshot?.paused[id],
                    apns: views,
                    fcm: fcmView,
                    refusals: refusals.map {
                        Refusal(
                            kind: $0.kind,
                            count: $0.count,
                            firstAt: format.string(from: $0.firstAt),
                            lastAt: format.string(from: $0.lastAt)
                        )
                    }
                )
            )
        }
        var schedulerView: SchedulerView?
        if only == nil, let scheduler {
            let (next, lag) = try await scheduler.lag(now: now)
            let s = scheduler.statistics
            let health = scheduler.currentHealth
            schedulerView = SchedulerView(
                nextDueAt: next.map { ISO8601DateFormatter().string(from: $0) },
                lagSeconds: lag,
                statistics: [
                    "due": s.due, "assigned": s.assigned, "alreadyAssigned": s.alreadyAssigned,
                    "skippedStale": s.skippedStale, "skippedNoImpulse": s.skippedNoImpulse,
                    "remindersFired": s.remindersFired, "requeued": s.requeued, "planned": s.planned,
                    "parked": s.parked,
                ],
                failing: health.consecutiveFailures == 0
                    ? nil
                    : Failing(
                        consecutiveFailures: health.consecutiveFailures,
                        since: health.failingSince.map { ISO8601DateFormatter().string(from: $0) },
                        lastError: health.lastError
                    )
            )
        }
        var database: DatabaseView?
        if only == nil, let shared = store as? any SharedStore {
            let state = try await shared.sharedState()
            database = DatabaseView(
                url: state.database,
                claims: state.claims,
                leases: state.leases,
                pool: ["inUse": state.poolInUse, "waiting": state.poolWaiting, "size": state.poolSize]
            )
        }
        let format = ISO8601DateFormatter()
        let pushing = gateway.map(\.currentPushHealth).flatMap { health in
            health.failingSince == nil && !health.probing
                ? nil
                : PushingView(
                    failingSince: health.failingSince.map(format.string(from:)),
                    gaveUpAt: health.gaveUpAt.map(format.string(from:)),
                    probing: health.probing
                )
        }
        return View(
            node: only == nil ? store.nodeID : "",
            pushing: only == nil ? pushing : nil,
            database: database,
            uptimeSeconds: only == nil ? Int(now.timeIntervalSince(startedAt)) : 0,
            pushesInFlight: only == nil ? snapshot?.inFlight : nil,
            pushLimits: only == nil ? gateway.map { ["inFlight": $0.limits.inFlight, "batch": $0.limits.batch] } : nil,
            scheduler: schedulerView,
            tenants: tenants
        )
    }
}
