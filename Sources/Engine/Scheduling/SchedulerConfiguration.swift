import Foundation

/// Configuration of the ``Scheduler``.
public struct SchedulerConfiguration: Sendable {
    /// Due rows taken from the index per transaction.
    public var batchSize: Int
    /// The longest the scheduler sleeps before looking at the index again (new users, other processes' changes).
    public var pollInterval: Duration
    /// A day whose time passed longer ago than this (the broker was down) is skipped instead of delivered late;
    /// also how far back unpushed deliveries are pushed again at start.
    public var staleness: Duration
    /// Users due in the same minute fire spread over this window, each at a fixed offset.
    public var spreadWindow: Duration
    /// A stand-alone impulse is not chosen again for a user within this many days (unless nothing else is left).
    public var repeatWindowDays: Int
    /// How often deliveries left unpushed (APNs kept failing) are handed to the push gateway again.
    public var sweepInterval: Duration
    /// The first and the longest pause after a failed pass (the store failing), doubling in between, jittered.
    public var failureBackoff: Duration
    public var maximumFailureBackoff: Duration
    /// Unsettled deliveries one sweep leases at most (a shared store): a restarted node, or the first node to
    /// sweep after another failed, does not take every expired lease; it sweeps again when it took a full share.
    public var sweepShare: Int
    /// Due rows and deliveries a node that has just given up on pushing takes to learn whether pushes get
    /// through again (``PushHealth``).
    public var probeShare: Int

    public init(
        batchSize: Int = 500,
        pollInterval: Duration = .seconds(1),
        staleness: Duration = .seconds(12 * 3600),
        spreadWindow: Duration = .seconds(300),
        repeatWindowDays: Int = 30,
        sweepInterval: Duration = .seconds(60),
        failureBackoff: Duration = .milliseconds(200),
        maximumFailureBackoff: Duration = .seconds(30),
        sweepShare: Int = 5000,
        probeShare: Int = 20
    ) {
        self.batchSize = max(1, batchSize)
        self.pollInterval = pollInterval
        self.staleness = staleness
        self.spreadWindow = spreadWindow
        self.repeatWindowDays = max(0, repeatWindowDays)
        self.sweepInterval = sweepInterval
        self.failureBackoff = failureBackoff
        self.maximumFailureBackoff = maximumFailureBackoff
        self.sweepShare = max(1, sweepShare)
        self.probeShare = max(1, probeShare)
    }
}

/// Whether the dispatch is failing (for inspection).
public struct SchedulerHealth: Sendable, Equatable {
    /// Failed passes in a row; 0 while the dispatch works.
    public var consecutiveFailures = 0
    public var failingSince: Date?
    public var lastError: String?

    public init(consecutiveFailures: Int = 0, failingSince: Date? = nil, lastError: String? = nil) {
        self.consecutiveFailures = consecutiveFailures
        self.failingSince = failingSince
        self.lastError = lastError
    }
}

/// What the scheduler did since it started (closed label sets only).
public struct SchedulerStatistics: Sendable, Equatable {
    /// Rows that came due for a day, delivered or skipped.
    public var due = 0
    /// Scheduled impulses recorded.
    public var assigned = 0
    /// Days that already had their impulse (a restart, another node).
    public var alreadyAssigned = 0
    public var skippedStale = 0
    /// Days with nothing to deliver (an empty catalog).
    public var skippedNoImpulse = 0
    public var remindersFired = 0
    /// Unpushed deliveries handed to the push gateway again at start.
    public var requeued = 0
    /// Rows planned (new users, changed preferences) and rows parked (disabled users).
    public var planned = 0
    public var parked = 0

    public init() {}
}
