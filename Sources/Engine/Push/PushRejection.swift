import Foundation

/// APNs' answer to one push, as the push transport reports it.
public enum PushResult: Sendable, Equatable {
    /// 200: APNs took the push; `apnsID` is the id it echoed.
    case accepted(apnsID: String)
    /// Any other status, with APNs' reason text (unknown reasons are kept verbatim) and, for 410, the moment
    /// APNs learned the token was invalid.
    case rejected(status: Int, reason: String, timestamp: Date?)
    /// The request never got an answer: deadline, reset, closed or refused connection. `resendable` is true when
    /// APNs provably did not process it (REFUSED_STREAM, a GOAWAY above the stream), so a resend cannot duplicate.
    case transportFailure(description: String, resendable: Bool)
}

extension PushResult {
    /// How a push that did not go through is told apart in logs and `/inspect` (nil: accepted).
    var refusalKind: String? {
        switch self {
        case .accepted: nil
        case .rejected(let status, let reason, _): "\(status) \(reason)"
        case .transportFailure(let description, _): "no answer: \(description)"
        }
    }
}

/// What the broker does about one push result. Pure decision logic: the push gateway executes it.
public enum PushAction: Sendable, Equatable {
    /// Record the push as delivered.
    case delivered
    /// Send again after `backoff`; `newConnection` when the old one must not be reused.
    case retry(backoff: Duration, newConnection: Bool)
    /// Make a fresh provider token, open a new connection, and send again.
    case renewProviderTokenAndRetry
    /// The push can never succeed as it is: record the failure; `alert` when it signals a bug or misconfiguration.
    case drop(alert: Bool)
    /// A transient failure (unreachable, 429, 5xx) outlasted the retries: leave the delivery unpushed so a later
    /// sweep (or the next start) tries again; it is not a verdict on the push.
    case deferred
    /// The token is malformed or for the wrong environment: stop using it until it is registered again.
    case quarantineToken
    /// The token belongs to another app: remove it for this topic.
    case removeTokenForTopic
    /// APNs says the token is gone: remove it only if it was registered before `since`.
    case removeTokenIfRegisteredBefore(since: Date)
    /// The tenant's credentials or topic are wrong: stop sending for the tenant and report the reason.
    case stopTenant(reason: String)

    /// What the action says about the device token, if it is a verdict on it.
    func verdict(on token: DeviceToken, at now: Date = Date()) -> TokenVerdict? {
        switch self {
        case .quarantineToken: TokenVerdict(token: token, kind: .quarantine(at: now))
        case .removeTokenForTopic: TokenVerdict(token: token, kind: .remove(registeredBefore: .distantFuture))
        case .removeTokenIfRegisteredBefore(let since):
            TokenVerdict(token: token, kind: .remove(registeredBefore: since))
        default: nil
        }
    }
}

/// Maps every APNs outcome to what the broker does (the table in `shared/docs/apns.md`).
public struct PushOutcomePolicy: Sendable {
    /// Retries before a retryable push is given up (counted by the caller).
    public var maximumAttempts: Int
    public var baseBackoff: Duration
    public var maximumBackoff: Duration

    public init(
        maximumAttempts: Int = 5,
        baseBackoff: Duration = .milliseconds(200),
        maximumBackoff: Duration = .seconds(30)
    ) {
        self.maximumAttempts = maximumAttempts
        self.baseBackoff = baseBackoff
        self.maximumBackoff = maximumBackoff
    }

    static let permanentBadRequests: Set<String> = [
        "BadCollapseId", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic", "DuplicateHeaders",
        "InvalidPushType", "MissingDeviceToken", "MissingTopic", "PayloadEmpty", "TopicDisallowed",
    ]
    static let tenantConfigurationErrors: Set<String> = [
        "BadCertificate", "BadCertificateEnvironment", "Forbidden", "InvalidProviderToken", "MissingProviderToken",
        "BadEnvironmentKeyInToken",
    ]

    /// The action for a result on the `attempt`-th try (1-based). `jitter` in 0...1 spreads retries.
    public func action(for result: PushResult, attempt: Int, jitter: Double = 0.5) -> PushAction {
        switch result {
        case .accepted:
            return .delivered
        case .transportFailure(_, let resendable):
            // A resend of a push APNs may have processed can show twice; the collapse id makes it replace
            // the first on the device, so retrying is still right, but it counts against the attempts.
            return retryOrDrop(attempt: resendable ? max(1, attempt - 1) : attempt, jitter: jitter, newConnection: true)
        case .rejected(let status, let reason, let timestamp):
            switch (status, reason) {
            case (400, "BadDeviceToken"):
                return .quarantineToken
            case (400, "DeviceTokenNotForTopic"):
                return .removeTokenForTopic
            case (400, "IdleTimeout"):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: true)
            case (400, let reason) where Self.permanentBadRequests.contains(reason):
                return .drop(alert: true)
            case (403, "ExpiredProviderToken"):
                return attempt < maximumAttempts ? .renewProviderTokenAndRetry : .drop(alert: true)
            case (403, "UnrelatedKeyIdInToken"):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: true)
            case (403, let reason) where Self.tenantConfigurationErrors.contains(reason):
                return .stopTenant(reason: reason)
            case (404, _), (405, _), (413, _):
                return .drop(alert: true)
            case (410, _):
                // Without a timestamp the token cannot be proven older than APNs' verdict: keep it.
                guard let timestamp else { return .drop(alert: false) }
                return .removeTokenIfRegisteredBefore(since: timestamp)
            case (429, "TooManyProviderTokenUpdates"):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: false, floor: .seconds(60))
            case (429, _), (500, _):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: false)
            case (503, "Shutdown"):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: true)
            case (503, _):
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: false)
            case (400..<500, _):
                return .drop(alert: true)
            default:
                return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: true)
            }
        }
    }

    /// Exponential backoff with jitter: base * 2^(attempt-1) * (0.5 + jitter), capped.
    public func backoff(attempt: Int, jitter: Double) -> Duration {
        let exponent = min(max(attempt - 1, 0), 20)
        let raw = baseBackoff * (1 << exponent)
        let capped = min(raw, maximumBackoff)
        return capped * (0.5 + min(max(jitter, 0), 1))
    }

    private func retryOrDrop(attempt: Int, jitter: Double, newConnection: Bool, floor: Duration = .zero) -> PushAction {
        guard attempt < maximumAttempts else { return .deferred }
        return .retry(backoff: max(backoff(attempt: attempt, jitter: jitter), floor), newConnection: newConnection)
    }
}
