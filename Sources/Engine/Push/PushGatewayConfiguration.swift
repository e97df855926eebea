import Foundation

/// Configuration of the push gateway.
public struct PushGatewayConfiguration: Sendable {
    /// Deliveries waiting per tenant; a producer suspends beyond it (backpressure, bounded memory).
    public var queueCapacityPerTenant: Int
    /// Pushes awaiting APNs' answer at once, across all tenants.
    ///
    /// Each answer gives its place back as it comes (since round 11; before, a batch held its places until its
    /// slowest answer). 4,000 is what four connections of 1,000 streams (APNs' usual limit, and the client's
    /// default pool) carry. Not counted: retries after a backoff, and resends of streams APNs did not process
    /// (REFUSED_STREAM, above a GOAWAY); APNs' stream limits still bound them.
    public var workers: Int
    /// Deliveries a worker takes at once (one tenant's): their devices are read, their pushes sent in one hop
    /// and one write, and their marks committed together.
    public var batchSize: Int
    public var policy: PushOutcomePolicy
    /// Pushes failing with none accepted this long: on a shared store the node hands its work to the others,
    /// holds as long again, then probes (``PushHealth``).
    public var givingUpAfter: Duration

    public init(
        queueCapacityPerTenant: Int = 1000,
        workers: Int = 4000,
        batchSize: Int = 250,
        policy: PushOutcomePolicy = .init(),
        givingUpAfter: Duration = .seconds(60)
    ) {
        self.queueCapacityPerTenant = max(1, queueCapacityPerTenant)
        self.workers = max(1, workers)
        self.batchSize = max(1, min(batchSize, self.workers))
        self.policy = policy
        self.givingUpAfter = max(.seconds(1), givingUpAfter)
    }

    /// Batches at once: four times what the places hold in whole batches, so that while a batch waits for its
    /// slowest answers, the places its other pushes gave back carry further batches. (Under a log-normal APNs
    /// latency of spread 0.5, the slowest of 250 answers takes about 3.4 times the mean.)
    var batchWorkers: Int { 4 * ((workers + batchSize - 1) / batchSize) }
}

/// Counters of what the gateway did (closed label sets: outcome, APNs reason).
public struct PushStatistics: Sendable, Equatable {
    public var accepted = 0
    public var rejected: [String: Int] = [:]
    public var retried = 0
    public var transportFailures = 0
    public var tokensQuarantined = 0
    public var tokensRemoved = 0
    public var withoutDevice = 0
    /// Pushes left unsent after transient failures outlasted the retries (tried again by a later sweep).
    public var deferred = 0
    /// Deliveries some of whose devices took the push while others' channels kept failing: recorded device by
    /// device and left unsettled, pushed again to the others alone.
    public var partlyPushed = 0

    public init() {}

    /// Counts a token verdict that was applied: every quarantine and topic removal, and a removal after a 410 only
    /// when the token was older than APNs' verdict (and so removed).
    mutating func count(_ verdict: TokenVerdict, changed: Bool) {
        switch verdict.kind {
        case .quarantine: tokensQuarantined += 1
        case .remove(let before) where before == .distantFuture: tokensRemoved += 1
        case .remove: if changed { tokensRemoved += 1 }
        }
    }
}
