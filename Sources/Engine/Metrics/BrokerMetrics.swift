import CoreMetrics
import Foundation
import Synchronization

/// Every metric the broker records, by name, in Prometheus form. Labels come from closed sets only: outcome,
/// APNs reason (Apple's list, anything else is `other`), route template, method, status, and the tenant while
/// no more than ``BrokerMetrics/tenantLabelLimit`` tenants have been seen (then `other`). Never a user id.
///
/// The factory is injected (the Prometheus registry in `main`, a private one in each test), so nothing here
/// touches the global `MetricsSystem`.
public struct BrokerMetrics: Sendable {
    public enum Name {
        public static let restRequests = "broker_rest_requests_total"
        public static let restDuration = "broker_rest_request_duration_seconds"
        public static let pushes = "broker_push_sent_total"
        public static let apnsDuration = "broker_apns_request_duration_seconds"
        public static let dispatchLag = "broker_dispatch_lag_seconds"
        public static let dispatched = "broker_dispatch_total"
        public static let pushesGivenUp = "broker_push_given_up_total"
        public static let queueDepth = "broker_push_queue_depth"
        public static let pushesInFlight = "broker_push_in_flight"
        public static let apnsConnections = "broker_apns_connections"
        public static let apnsStreamsInFlight = "broker_apns_streams_in_flight"
        public static let apnsStreamLimit = "broker_apns_stream_limit"
        public static let apnsGoAways = "broker_apns_goaways_total"
        public static let apnsConnects = "broker_apns_connects_total"
        public static let tokens = "broker_tokens_total"
        public static let ledgerWrites = "broker_ledger_writes_total"
        public static let storeDuration = "broker_store_duration_seconds"
        public static let residentMemory = "broker_process_resident_memory_bytes"
        public static let schedulerLag = "broker_scheduler_lag_seconds"
        public static let schedulerFailures = "broker_scheduler_failures_total"
        public static let schedulerFailing = "broker_scheduler_failing"
        /// A shared store (PostgreSQL): this node's claims and leases, and its connection pool.
        public static let storeClaims = "broker_store_claims"
        public static let storeLeases = "broker_store_leases"
        public static let storePoolInUse = "broker_store_pool_in_use"
        public static let storePoolWaiting = "broker_store_pool_waiting"
        /// 1, labelled with the node's id (the same as `/inspect`'s `node`).
        public static let nodeInfo = "broker_node_info"
        public static let tlsCertificateExpiry = "broker_tls_certificate_expiry_timestamp_seconds"
        public static let backupLastSuccess = "broker_backup_last_success_timestamp_seconds"
        public static let credentialRefused = "broker_push_credential_refused"
        public static let ready = "broker_ready"
        public static let buildInfo = "broker_build_info"
        public static let dataFreeBytes = "broker_data_free_bytes"
        public static let dataSizeBytes = "broker_data_size_bytes"
        public static let webhookOutboxPending = "broker_webhook_outbox_pending"
        public static let learnedTimingFallback = "broker_learned_timing_fallback"
        public static let apnsCertificateExpiry = "broker_apns_certificate_expiry_timestamp_seconds"
    }

    /// Tenants labelled by name; more than this many share the label `other`.
    public static let tenantLabelLimit = 100

    /// APNs reasons kept as labels (the documented ones); anything else is `other`.
    static let knownReasons: Set<String> = PushOutcome.permanentBadRequests
        .union(PushOutcome.tenantConfigurationErrors)
        .union([
            "BadDeviceToken", "DeviceTokenNotForTopic", "IdleTimeout", "ExpiredProviderToken", "UnrelatedKeyIdInToken",
            "BadPath", "MethodNotAllowed", "Unregistered", "ExpiredToken", "PayloadTooLarge",
            "TooManyProviderTokenUpdates", "TooManyRequests", "InternalServerError", "ServiceUnavailable", "Shutdown",
        ])

    public let factory: any MetricsFactory
    private let tenants: TenantLabels
    // Handles with fixed labels, made once: the store records every statement.
    private let storeRead: CoreMetrics.Timer
    private let storeWrite: CoreMetrics.Timer
    private let handles = HandleCache()

    public init(factory: any MetricsFactory) {
        self.factory = factory
        self.tenants = TenantLabels()
        self.storeRead = CoreMetrics.Timer(
            label: Name.storeDuration,
            dimensions: [("operation", "read")],
            preferredDisplayUnit: .seconds,
            factory: factory
        )
        self.storeWrite = CoreMetrics.Timer(
            label: Name.storeDuration,
            dimensions: [("operation", "write")],
            preferredDisplayUnit: .seconds,
            factory: factory
        )
    }

    /// Records nothing.
    public static var disabled: BrokerMetrics { BrokerMetrics(factory: NOOPMetricsHandler.instance) }

    /// The tenant's label value: its id while the set of labelled tenants is bounded, else `other`.
    public func tenantLabel(_ tenant: TenantID) -> String { tenants.label(tenant) }

    /// FCM's error codes (its `ErrorCode` enum, and the status it answers with when it names none) and the
    /// broker's own refusals of a tenant's Android pushes (`FCMCredentialFailed: <reason>` counts as its prefix).
    static let knownFCMReasons: Set<String> = [
        "UNSPECIFIED_ERROR", "INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE",
        "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "RESOURCE_EXHAUSTED",
        "NoFCMCredential", "FCMCredentialFailed",
    ]

    /// The `reason` label of a refusal on `channel`: one of the channel's documented reasons, else `other`.
    public func reasonLabel(_ reason: String, channel: PushChannel = .apns) -> String {
        switch channel {
        case .apns: return Self.knownReasons.contains(reason) ? reason : "other"
        case .fcm:
            let code = reason.split(separator: ":", maxSplits: 1).first.map(String.init) ?? reason
            return Self.knownFCMReasons.contains(code) ? code : "other"
        }
    }

    // Handles are kept by name and labels: every request and push records, and the label sets are closed.
    public func counter(_ name: String, _ dimensions: [(String, String)] = []) -> Counter {
        handles.counter(Self.key(name, dimensions)) { Counter(label: name, dimensions: dimensions, factory: factory) }
    }

    public func timer(_ name: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Timer {
        handles.timer(Self.key(name, dimensions)) {
            CoreMetrics.Timer(label: name, dimensions: dimensions, preferredDisplayUnit: .seconds, factory: factory)
        }
    }

    public func gauge(_ name: String, _ dimensions: [(String, String)] = []) -> Gauge {
        Gauge(label: name, dimensions: dimensions, factory: factory)
    }

    private static func key(_ name: String, _ dimensions: [(String, String)]) -> String {
        dimensions.reduce(name) { $0 + "|" + $1.0 + "=" + $1.1 }
    }

    // MARK: Events recorded by the engine

    /// One answer (or transport failure) for one device.
    func push(tenant: TenantID, channel: PushChannel, result: PushResult, duration: Duration) {
        pushes(tenant: tenant, [PushAnswer(result: result, latency: duration)], channels: [channel])
    }

    /// A batch's answers for one tenant, with each push's channel: the labels and handles are looked up once per
    /// distinct outcome and once for the latency timer, not once per push.
    func pushes(tenant: TenantID, _ answers: [PushAnswer], channels: [PushChannel]) {
        guard !answers.isEmpty else { return }
        let tenant = tenantLabel(tenant)
        var counts: [String: (channel: PushChannel, outcome: String, reason: String, count: Int)] = [:]
        for (index, answer) in answers.enumerated() {
            let channel = index < channels.count ? channels[index] : .apns
            let prefix = channel.rawValue + "|"
            switch answer.result {
            case .accepted: counts[prefix + "accepted", default: (channel, "accepted", "", 0)].count += 1
            case .rejected(_, let reason, _), .refused(_, _, let reason, _):
                counts[prefix + "r" + reason, default: (channel, "rejected", reasonLabel(reason, channel: channel), 0)]
                    .count += 1
            case .transportFailure:
                counts[prefix + "transport_failure", default: (channel, "transport_failure", "", 0)].count += 1
            }
        }
        for entry in counts.values {
            counter(
                Name.pushes,
                [
                    ("tenant", tenant), ("channel", entry.channel.rawValue), ("outcome", entry.outcome),
                    ("reason", entry.reason),
                ]
            ).increment(by: entry.count)
        }
        let latency = timer(Name.apnsDuration, [("tenant", tenant)])
        for answer in answers { latency.recordNanoseconds(answer.latency.nanoseconds) }
    }

    /// A token event: `registered`, `moved`, `unregistered`, `quarantined` or `removed`.
    func token(_ event: String, tenant: TenantID, count: Int = 1) {
        guard count > 0 else { return }
        counter(Name.tokens, [("tenant", tenantLabel(tenant)), ("event", event)]).increment(by: count)
    }

    /// Deliveries the sweep gave up (unsettled past the staleness limit).
    func givenUp(tenant: TenantID, count: Int) {
        guard count > 0 else { return }
        counter(Name.pushesGivenUp, [("tenant", tenantLabel(tenant))]).increment(by: count)
    }

    func dispatched(_ outcome: String, count: Int) {
        guard count > 0 else { return }
        counter(Name.dispatched, [("outcome", outcome)]).increment(by: count)
    }

    /// Several deliveries' lags, one handle lookup.
    /// A failed dispatch pass (a read or a commit).
    func schedulerFailure() {
        counter(Name.schedulerFailures).increment()
    }

    /// 1 while the dispatch is failing, 0 once it works.
    func schedulerFailing(_ failing: Bool) {
        gauge(Name.schedulerFailing).record(failing ? 1 : 0)
    }

    func dispatchLag(tenant: TenantID, seconds: [Double]) {
        guard !seconds.isEmpty else { return }
        let lag = timer(Name.dispatchLag, [("tenant", tenantLabel(tenant))])
        for value in seconds { lag.recordNanoseconds(Int64(max(0, value) * 1e9)) }
    }

    func ledgerWrites(_ kind: String, count: Int) {
        guard count > 0 else { return }
        counter(Name.ledgerWrites, [("kind", kind)]).increment(by: count)
    }

    public func storeOperation(_ operation: String, duration: Duration) {
        (operation == "write" ? storeWrite : storeRead).recordNanoseconds(duration.nanoseconds)
    }
}

/// Metric handles by name and label values (the label sets are closed, so this stays small).
final class HandleCache: Sendable {
    private let counters = Mutex<[String: Counter]>([:])
    private let timers = Mutex<[String: CoreMetrics.Timer]>([:])

    func counter(_ key: String, make: () -> Counter) -> Counter {
        if let cached = counters.withLock({ $0[key] }) { return cached }
        let made = make()
        counters.withLock { $0[key] = made }
        return made
    }

    func timer(_ key: String, make: () -> CoreMetrics.Timer) -> CoreMetrics.Timer {
        if let cached = timers.withLock({ $0[key] }) { return cached }
        let made = make()
        timers.withLock { $0[key] = made }
        return made
    }
}

/// The bounded set of tenants that get their own label.
final class TenantLabels: Sendable {
    private let labelled = Mutex(Set<TenantID>())

    func label(_ tenant: TenantID) -> String {
        labelled.withLock { set in
            if set.contains(tenant) { return tenant.rawValue }
            guard set.count < BrokerMetrics.tenantLabelLimit else { return "other" }
            set.insert(tenant)
            return tenant.rawValue
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
