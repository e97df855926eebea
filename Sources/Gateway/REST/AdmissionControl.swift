import Engine
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// How many REST requests may be in progress: on the node, and for one tenant (its share of the node).
public struct AdmissionLimits: Sendable, Equatable {
    public var node: Int
    public var perTenant: Int

    public init(node: Int = 512, perTenant: Int = 256) {
        self.node = max(1, node)
        self.perTenant = max(1, min(perTenant, self.node))
    }
}

/// The requests in progress per tenant and in total; decides whether one more may start. A pure value.
struct AdmissionState: Sendable {
    enum Verdict: Equatable {
        case admitted
        /// The node has `limits.node` requests in progress: 503.
        case nodeFull
        /// The tenant has its share in progress: 429, while other tenants are still served.
        case tenantFull
    }

    let limits: AdmissionLimits
    private(set) var total = 0
    private(set) var perTenant: [String: Int] = [:]
    /// Whether the node is under pressure: set when it is full or a tenant is at its share, cleared once the node
    /// and every tenant are back to half their bounds and `relief` has passed since the last time either was full
    /// (so that clients told to slow down do not flood it again at once).
    private(set) var pressed = false
    private var lastFull: Date?
    let relief: Duration

    init(limits: AdmissionLimits, relief: Duration = .seconds(2)) {
        self.limits = limits
        self.relief = relief
    }

    /// The change of `pressed` the last admit or release made, if any.
    mutating func pressureChange(now: Date, tenant: String) -> Bool? {
        let full = total >= limits.node || perTenant[tenant, default: 0] >= limits.perTenant
        if full { lastFull = now }
        if !pressed, full {
            pressed = true
            return true
        }
        if pressed, total <= limits.node / 2, lastFull.map({ now.timeIntervalSince($0) >= relief.seconds }) ?? true,
            !perTenant.values.contains(where: { $0 > limits.perTenant / 2 })
        {
            pressed = false
            return false
        }
        return nil
    }

    mutating func admit(tenant: String) -> Verdict {
        let current = perTenant[tenant, default: 0]
        guard current < limits.perTenant else { return .tenantFull }
        guard total < limits.node else { return .nodeFull }
        total += 1
        perTenant[tenant] = current + 1
        return .admitted
    }

    /// Counts work that goes on after its request was answered (past its deadline) without asking: it still
    /// holds its place until it ends.
    mutating func hold(tenant: String) {
        total += 1
        perTenant[tenant, default: 0] += 1
    }

    mutating func release(tenant: String) {
        total -= 1
        let left = perTenant[tenant, default: 1] - 1
        // Entries go when they reach 0: a flood of made-up tenant names holds no memory beyond what is in progress.
        perTenant[tenant] = left > 0 ? left : nil
    }
}

/// Admission control for the REST API: beyond the node's bound a request is answered 503 `overloaded`, beyond its
/// tenant's share 429 `tenant-over-share`, both at once, without work, with `Retry-After: 1`, so the requests
/// admitted keep their latency instead of everyone queueing. `/health` and `/health/live` are not counted (a load
/// balancer must see how a busy node is). A request counts from routing until its handler returns its answer.
final class AdmissionControl: Sendable {
    private let state: Mutex<AdmissionState>
    /// Told when the node comes under pressure (full) and when it is relieved (back to half).
    let governor: StreamGovernor?
    /// What the relief time is measured on (a test's ``EngineClock`` moves it by hand).
    let clock: any EngineClock

    init(
        limits: AdmissionLimits,
        governor: StreamGovernor? = nil,
        relief: Duration = .seconds(2),
        clock: any EngineClock = SystemClock()
    ) {
        state = Mutex(AdmissionState(limits: limits, relief: relief))
        self.governor = governor
        self.clock = clock
    }

    func admit(tenant: String) -> AdmissionState.Verdict {
        let (verdict, change) = state.withLock { state in
            let verdict = state.admit(tenant: tenant)
            return (verdict, state.pressureChange(now: clock.now, tenant: tenant))
        }
        if let change { governor?.pressure(change) }
        return verdict
    }

    func release(tenant: String) {
        let change = state.withLock { state in
            state.release(tenant: tenant)
            return state.pressureChange(now: clock.now, tenant: tenant)
        }
        if let change { governor?.pressure(change) }
    }

    func hold(tenant: String) { state.withLock { $0.hold(tenant: tenant) } }
    var inProgress: Int { state.withLock { $0.total } }

    /// Over HTTP/2 the engine asks before a request becomes a task: a refusal then costs no routing, no task and
    /// no encoding (the answers below are encoded once). Returns nil when admitted, else the answer to send; the
    /// caller releases an admitted request when its task ends. `path` is the `:path` pseudo-header.
    /// The probes (`/health`, `/health/live`) are never counted or refused: a full node must still say how it is.
    static func isProbe(_ route: Substring) -> Bool { route == "/health" || route == "/health/live" }

    func admitOrRefuse(path: String) -> (tenant: String, refusal: (status: String, body: ByteBuffer)?) {
        let route = path.prefix { $0 != "?" }
        guard !Self.isProbe(route) else { return ("", nil) }
        let tenant = Self.tenant(ofPath: String(route))
        switch admit(tenant: tenant) {
        case .admitted: return (tenant, nil)
        case .nodeFull: return (tenant, ("503", Self.overloadedBody))
        case .tenantFull: return (tenant, ("429", Self.tenantFullBody))
        }
    }

    /// The two refusals, as the middleware throws them and (encoded once) as the HTTP/2 engine sends them.
    static let overloaded = Problem.retryLater(
        .serviceUnavailable,
        "overloaded",
        "the broker is at its limit of requests in progress; try again shortly",
        after: .seconds(1)
    )
    static let tenantFull = Problem.retryLater(
        .tooManyRequests,
        "tenant-over-share",
        "your organisation's requests in progress are at their share of this node; try again shortly",
        after: .seconds(1)
    )
    static let overloadedBody = (try? overloaded.body(instance: nil)) ?? ByteBuffer()
    static let tenantFullBody = (try? tenantFull.body(instance: nil)) ?? ByteBuffer()

    /// The tenant a path addresses: the segment after `/t/`, or "" for the unprefixed default tenant's routes.
    static func tenant(ofPath path: String) -> String {
        guard path.hasPrefix("/t/") else { return "" }
        return String(path.dropFirst(3).prefix { $0 != "/" }.prefix(64))
    }
}

/// Admission for requests that did not pass the HTTP/2 engine's check (HTTP/1.1, the plain listener).
struct AdmissionMiddleware: RouterMiddleware {
    let control: AdmissionControl

    func handle(
        _ request: Request,
        context: BrokerRequestContext,
        next: (Request, BrokerRequestContext) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path
        guard !AdmissionControl.isProbe(path[...]), !context.admitted else { return try await next(request, context) }
        let tenant = AdmissionControl.tenant(ofPath: path)
        switch control.admit(tenant: tenant) {
        case .admitted:
            defer { control.release(tenant: tenant) }
            return try await next(request, context)
        case .nodeFull: throw AdmissionControl.overloaded
        case .tenantFull: throw AdmissionControl.tenantFull
        }
    }
}
