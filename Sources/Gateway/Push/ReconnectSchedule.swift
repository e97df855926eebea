import Engine

/// When an APNs pool may open a connection, and what counts as a failure: a pure value the client consults.
///
/// One failure is counted per pool attempt: connects that ran in parallel and failed together, or connections
/// lost together, count once (each attempt carries the `round` it started in; only a failure of the current
/// round counts and starts the next). While no connection is open only one connect runs at a time (a probe),
/// and the pause between probes doubles from `initialBackoff` to `maximumBackoff`, jittered: after an outage
/// of N seconds the next probe comes at most `maximumBackoff` after it ends. A connection that carried accepted
/// pushes and then ended (GOAWAY, an idle close) is not a failure: it is replaced after a short pause.
struct ReconnectSchedule: Sendable {
    private(set) var streak: FailureStreak
    private(set) var nextAttemptAt: ContinuousClock.Instant
    /// Bumped with every counted failure; an attempt's failure counts only if it started in the current round.
    private(set) var round = 0
    /// Until when APNs asked not to be sent to (503 answers): pushes wait for it even over open connections.
    private(set) var pausedUntil: ContinuousClock.Instant?
    /// Until when the service asked not to be sent to (FCM's `Retry-After`).
    private(set) var heldUntil: ContinuousClock.Instant?

    init(initialBackoff: Duration, maximumBackoff: Duration, now: ContinuousClock.Instant = .now) {
        streak = FailureStreak(initialBackoff: initialBackoff, maximumBackoff: maximumBackoff)
        nextAttemptAt = now
    }

    /// Whether a new connection may be opened now.
    func mayConnect(now: ContinuousClock.Instant, open: Int, connecting: Int, maximum: Int) -> Bool {
        guard now >= nextAttemptAt else { return false }
        // Nothing works: one probe at a time, so one outage costs one failure per attempt, not one per caller.
        if open == 0 { return connecting == 0 }
        return open + connecting < maximum
    }

    /// A connect (started in `round`) failed; returns `.startedFailing` when the pool just became unreachable.
    mutating func attemptFailed(
        round: Int,
        error: String,
        now: ContinuousClock.Instant,
        jitter: Double
    ) -> FailureStreak.Transition? {
        guard round == self.round else { return nil }
        self.round += 1
        let transition = streak.failed(error, at: now)
        nextAttemptAt = now + streak.backoff(jitter: jitter)
        return transition
    }

    /// A connection opened in `round` closed or got GOAWAY. One that never had a push accepted counts as a
    /// failed attempt (a server that sends GOAWAY at once must not see a reconnect loop); one that worked is
    /// replaced after the initial pause.
    mutating func connectionLost(
        round: Int,
        carriedPushes: Bool,
        now: ContinuousClock.Instant,
        jitter: Double
    ) -> FailureStreak.Transition? {
        guard carriedPushes else {
            return attemptFailed(
                round: round,
                error: "connection lost before APNs accepted a push",
                now: now,
                jitter: jitter
            )
        }
        let pause = streak.initialBackoff * min(max(jitter, 0.5), 1.5)
        nextAttemptAt = max(nextAttemptAt, now + pause)
        return nil
    }

    /// APNs answered 503 to a push sent in `round`: a failed attempt (once per round) that also pauses sending
    /// over the open connections until the next attempt.
    mutating func unavailable(
        round: Int,
        reason: String,
        now: ContinuousClock.Instant,
        jitter: Double
    ) -> FailureStreak.Transition? {
        let transition = attemptFailed(round: round, error: "APNs answered 503 \(reason)", now: now, jitter: jitter)
        if streak.isFailing { pausedUntil = nextAttemptAt }
        return transition
    }

    /// The service asked every sender to pause until `until` (FCM's `Retry-After`): not ended by an accepted push,
    /// which may have been in flight before the pause was asked for.
    mutating func hold(until: ContinuousClock.Instant) {
        heldUntil = max(heldUntil ?? until, until)
    }

    /// Whether pushes must wait (APNs answered 503, FCM asked for a pause), and until when.
    func paused(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        let until = max(pausedUntil ?? now, heldUntil ?? now)
        return now < until ? until : nil
    }

    /// APNs accepted a push: the pool works; returns `.recovered` when that ends an outage.
    mutating func accepted(now: ContinuousClock.Instant) -> FailureStreak.Transition? {
        pausedUntil = nil
        guard streak.isFailing else { return nil }
        round += 1
        nextAttemptAt = min(nextAttemptAt, now)
        return streak.succeeded(at: now)
    }
}
