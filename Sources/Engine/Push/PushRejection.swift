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
    /// Another channel's answer that is not an acceptance (FCM's), mapped by its transport into the neutral
    /// `outcome`; `status` (0: no HTTP answer) and `reason` (its own error code, kept verbatim) are for logs,
    /// metrics and `/inspect`.
    case refused(channel: PushChannel, status: Int, reason: String, outcome: PushOutcome)
}

extension PushResult {
    /// How a push that did not go through is told apart in logs and `/inspect` (nil: accepted).
    var refusalKind: String? {
        switch self {
        case .accepted: nil
        case .rejected(let status, let reason, _): "\(status) \(reason)"
        case .transportFailure(let description, _): "no answer: \(description)"
        case .refused(let channel, let status, let reason, _): "\(channel.rawValue) \(status) \(reason)"
        }
    }

    /// The status and reason of an answer that refused the push (nil: accepted, or no answer at all).
    public var refusal: (status: Int, reason: String)? {
        switch self {
        case .rejected(let status, let reason, _), .refused(_, let status, let reason, _): (status, reason)
        case .accepted, .transportFailure: nil
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

/// What one push's answer means, whatever the channel: every transport maps its answers into this (APNs below in
/// `PushOutcome.apns`, FCM in `PushOutcome.fcm`), and `PushOutcomePolicy` decides on it alone.
public enum PushOutcome: Sendable, Equatable {
    /// The channel took the push.
    case accepted
    /// Not now: send again later (`floor`: not before, as the channel asked), on a new connection when
    /// `newConnection`.
    case retry(newConnection: Bool, floor: Duration = .zero)
    /// No answer (deadline, reset, closed or refused connection); `resendable` when the channel provably did not
    /// process the push, so a resend cannot show twice.
    case connectionFailure(resendable: Bool)
    /// The device is gone for this app. `evidence`: when the channel learned it; a device registered after that is
    /// a new registration and stays. Without evidence the device stays (APNs' 410 without a timestamp).
    case deviceGone(evidence: Date?)
    /// The device's identity is malformed or for another environment: no pushes to it until it registers again.
    case deviceInvalid
    /// The device belongs to another app (APNs' topic, FCM's sender): remove it for this one.
    case deviceNotForApp
    /// The push itself can never go through as it is; `alert`: it signals a bug or a misconfiguration.
    case payloadRefused(alert: Bool)
    /// The credential's session token expired: make a fresh one and send again.
    case credentialExpired
    /// The tenant's credential (or its app identity) is refused: stop the tenant's pushes and say why. Never a
    /// verdict on a device.
    case credentialRefused(reason: String)
}

extension PushOutcome {
    static let permanentBadRequests: Set<String> = [
        "BadCollapseId", "BadExpirationDate", "BadMessageId", "BadPriority", "BadTopic", "DuplicateHeaders",
        "InvalidPushType", "MissingDeviceToken", "MissingTopic", "PayloadEmpty", "TopicDisallowed",
    ]
    static let tenantConfigurationErrors: Set<String> = [
        "BadCertificate", "BadCertificateEnvironment", "Forbidden", "InvalidProviderToken", "MissingProviderToken",
        "BadEnvironmentKeyInToken",
    ]

    /// What a transport's answer means: APNs' own answers through `apns`, other channels' as their transport
    /// mapped them.
    public init(_ result: PushResult) {
        self = .apns(result)
    }

    /// APNs' answers (the table in `shared/docs/apns.md`); another channel's refusal keeps its mapped outcome.
    public static func apns(_ result: PushResult) -> PushOutcome {
        switch result {
        case .accepted:
            return .accepted
        case .refused(_, _, _, let outcome):
            return outcome
        case .transportFailure(_, let resendable):
            return .connectionFailure(resendable: resendable)
        case .rejected(let status, let reason, let timestamp):
            switch (status, reason) {
            case (400, "BadDeviceToken"): return .deviceInvalid
            case (400, "DeviceTokenNotForTopic"): return .deviceNotForApp
            case (400, "IdleTimeout"): return .retry(newConnection: true)
            case (400, let reason) where permanentBadRequests.contains(reason): return .payloadRefused(alert: true)
            case (403, "ExpiredProviderToken"): return .credentialExpired
            case (403, "UnrelatedKeyIdInToken"): return .retry(newConnection: true)
            case (403, let reason) where tenantConfigurationErrors.contains(reason):
                return .credentialRefused(reason: reason)
            case (404, _), (405, _), (413, _): return .payloadRefused(alert: true)
            case (410, _): return .deviceGone(evidence: timestamp)
            case (429, "TooManyProviderTokenUpdates"): return .retry(newConnection: false, floor: .seconds(60))
            case (429, _), (500, _): return .retry(newConnection: false)
            case (503, "Shutdown"): return .retry(newConnection: true)
            case (503, _): return .retry(newConnection: false)
            case (400..<500, _): return .payloadRefused(alert: true)
            default: return .retry(newConnection: true)
            }
        }
    }

    /// FCM HTTP v1's answers: the HTTP status, the error's `details[].errorCode` (its `status` when it names
    /// none), whether an INVALID_ARGUMENT is about the message's token (`fieldViolations` naming `message.token`),
    /// `Retry-After`, and when the answer came: FCM gives no time of its own, so an UNREGISTERED is evidence from
    /// that moment. Only UNREGISTERED and a token's INVALID_ARGUMENT judge a device; SENDER_ID_MISMATCH, 401 and
    /// 403 are the credential's failures (the client refreshes its access token once on a 401 before it answers).
    public static func fcm(
        status: Int,
        errorCode: String?,
        aboutToken: Bool = false,
        retryAfter: Duration? = nil,
        answeredAt: Date
    ) -> PushOutcome {
        let floor = retryAfter ?? .zero
        switch (status, errorCode) {
        case (200, _): return .accepted
        case (_, "UNREGISTERED"): return .deviceGone(evidence: answeredAt)
        case (_, "SENDER_ID_MISMATCH"), (_, "THIRD_PARTY_AUTH_ERROR"): return .credentialRefused(reason: errorCode!)
        case (401, _): return .credentialRefused(reason: errorCode ?? "UNAUTHENTICATED")
        case (403, _): return .credentialRefused(reason: errorCode ?? "PERMISSION_DENIED")
        case (_, "INVALID_ARGUMENT"): return aboutToken ? .deviceInvalid : .payloadRefused(alert: true)
        case (_, "QUOTA_EXCEEDED"), (429, _), (_, "UNAVAILABLE"), (503, _), (_, "INTERNAL"), (500, _):
            return .retry(newConnection: false, floor: floor)
        case (400..<500, _): return .payloadRefused(alert: true)
        default: return .retry(newConnection: true, floor: floor)
        }
    }
}

/// Maps every push outcome, whatever its channel, to what the broker does.
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

    /// The action for a transport's answer on the `attempt`-th try (1-based). `jitter` in 0...1 spreads retries.
    public func action(for result: PushResult, attempt: Int, jitter: Double = 0.5) -> PushAction {
        action(for: PushOutcome(result), attempt: attempt, jitter: jitter)
    }

    /// The action for an outcome on the `attempt`-th try (1-based). `jitter` in 0...1 spreads retries.
    public func action(for outcome: PushOutcome, attempt: Int, jitter: Double = 0.5) -> PushAction {
        switch outcome {
        case .accepted:
            return .delivered
        case .connectionFailure(let resendable):
            // A resend of a push the channel may have processed can show twice; the collapse id makes it replace
            // the first on the device, so retrying is still right, but it counts against the attempts.
            return retryOrDrop(attempt: resendable ? max(1, attempt - 1) : attempt, jitter: jitter, newConnection: true)
        case .retry(let newConnection, let floor):
            return retryOrDrop(attempt: attempt, jitter: jitter, newConnection: newConnection, floor: floor)
        case .deviceInvalid:
            return .quarantineToken
        case .deviceNotForApp:
            return .removeTokenForTopic
        case .deviceGone(let evidence):
            // Without evidence the device cannot be proven older than the verdict: keep it.
            guard let evidence else { return .drop(alert: false) }
            return .removeTokenIfRegisteredBefore(since: evidence)
        case .payloadRefused(let alert):
            return .drop(alert: alert)
        case .credentialExpired:
            return attempt < maximumAttempts ? .renewProviderTokenAndRetry : .drop(alert: true)
        case .credentialRefused(let reason):
            return .stopTenant(reason: reason)
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
