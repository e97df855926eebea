/// Consecutive failures of one repeated operation (the scheduler's dispatch, an APNs pool's connects): the pause
/// before the next attempt and the state changes worth one log line each. A pure value; its owner sleeps and logs.
///
/// The pause doubles from `initialBackoff` with each failure up to `maximumBackoff`, times a jitter factor in
/// 0.5-1.5 the caller draws, so that many owners failing together do not retry in step.
public struct FailureStreak: Sendable, Equatable {
    public var initialBackoff: Duration
    public var maximumBackoff: Duration
    /// Failures since the last success; 0 while healthy.
    public private(set) var failures = 0
    /// When the first failure of the current streak happened.
    public private(set) var since: ContinuousClock.Instant?
    /// The latest failure's description.
    public private(set) var lastError: String?

    public init(initialBackoff: Duration = .milliseconds(100), maximumBackoff: Duration = .seconds(30)) {
        self.initialBackoff = initialBackoff
        self.maximumBackoff = max(initialBackoff, maximumBackoff)
    }

    public var isFailing: Bool { failures > 0 }

    /// A change worth logging.
    public enum Transition: Sendable, Equatable {
        /// The first failure after a success (or since the start).
        case startedFailing(error: String)
        /// The first success after `failures` failures that lasted `duration`.
        case recovered(failures: Int, duration: Duration)
    }

    /// Records a failure; returns `.startedFailing` for the first of a streak, nil for the others.
    public mutating func failed(_ error: String, at now: ContinuousClock.Instant) -> Transition? {
        failures += 1
        lastError = error
        guard failures == 1 else { return nil }
        since = now
        return .startedFailing(error: error)
    }

    /// Records a success; returns `.recovered` when it ends a streak.
    public mutating func succeeded(at now: ContinuousClock.Instant) -> Transition? {
        defer {
            failures = 0
            since = nil
            lastError = nil
        }
        guard failures > 0 else { return nil }
        return .recovered(failures: failures, duration: (since ?? now).duration(to: now))
    }

    /// The pause before the next attempt: zero while healthy, else the doubled backoff times `jitter` (0.5-1.5,
    /// clamped), never above `maximumBackoff`.
    public func backoff(jitter: Double) -> Duration {
        guard failures > 0 else { return .zero }
        let doubled = initialBackoff * (1 << min(failures - 1, 30))
        let capped = min(doubled, maximumBackoff)
        return min(capped * min(max(jitter, 0.5), 1.5), maximumBackoff)
    }
}
