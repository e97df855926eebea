import Foundation
import Logging
import Synchronization

/// Group commit for delivery marks: callers that arrive while a transaction is running share the next one.
///
/// Each caller suspends until the transaction holding its marks has committed, so a mark is durable when
/// `write` returns, yet a burst of concurrent requests costs a few transactions instead of one each.
/// Every pending entry is a suspended caller (a request in flight), so the queue is bounded by the
/// server's admission limits, not by this type.
actor MarkWriter {
    private let store: any LedgerStore
    private let maximumBatch: Int
    private let metrics: BrokerMetrics
    private var pending: [(marks: [DeliveryMark], continuation: CheckedContinuation<Void, any Error>?, at: Date)] = []
    private var flushing = false
    /// Marks submitted without waiting for their commit and not yet committed, and the callers waiting for that
    /// backlog to shrink.
    private var backlog = 0
    private let maximumBacklog: Int
    /// How long a submitted mark may wait for its commit before submitters wait: what a crash can lose.
    private let maximumLag: Duration
    /// When the oldest submitted mark not yet committed was submitted (nil: none is waiting), on `clock`.
    private var oldestSubmitted: Date?
    /// What the lag is measured on (a test's ``EngineClock`` moves it by hand).
    private let clock: any EngineClock
    /// Submitters waiting for the backlog to shrink or the lag to fall (for tests and inspection).
    var waitingSubmitters: Int { backlogWaiters.count }
    private var backlogWaiters: [CheckedContinuation<Void, Never>] = []
    /// Marks offered from outside the actor without waiting (an APNs answer on its event loop), and whether a
    /// task to take them in is on its way.
    private nonisolated let inbox = Mutex<(marks: [DeliveryMark], scheduled: Bool)>(([], false))
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private let logger: Logger?

    init(
        store: any LedgerStore,
        maximumBatch: Int = 2048,
        maximumBacklog: Int = 20_000,
        maximumLag: Duration = .milliseconds(250),
        metrics: BrokerMetrics = .disabled,
        logger: Logger? = nil,
        clock: any EngineClock = SystemClock()
    ) {
        self.clock = clock
        self.store = store
        self.maximumBatch = maximumBatch
        self.maximumBacklog = maximumBacklog
        self.maximumLag = maximumLag
        self.metrics = metrics
        self.logger = logger
    }

    /// Queues marks for the next group commit without waiting for it; waits while the marks queued this way
    /// exceed the backlog limit, or the oldest of them has waited longer than `maximumLag` for its commit (a
    /// writer that falls behind slows the caller: memory stays bounded, and so does what a crash can lose).
    /// For marks whose loss in a crash only repeats work: a push marked here and lost is pushed again at the
    /// next start, under the same collapse id; the lag bound keeps those repeats to the pushes of about
    /// `maximumLag` before the crash.
    ///
    /// Marks offered as answers came (`offer`) count too, and a caller with nothing left to submit still waits
    /// for room: the gateway cannot outrun the writer by offering instead of submitting.
    func submit(_ marks: [DeliveryMark]) async {
        takeInbox()
        while backlog >= maximumBacklog
            || oldestSubmitted.map({ clock.now.timeIntervalSince($0) > maximumLag.seconds }) == true
        {
            await withCheckedContinuation { backlogWaiters.append($0) }
        }
        enqueue(marks)
    }

    /// Queues marks nobody waits for: they count towards the backlog and the lag bound.
    private func enqueue(_ marks: [DeliveryMark]) {
        guard !marks.isEmpty else { return }
        backlog += marks.count
        let now = clock.now
        if oldestSubmitted == nil { oldestSubmitted = now }
        pending.append((marks, nil, now))
        startFlushing()
    }

    /// Queues marks for the next group commit from any thread without waiting, as an answer arrives: they count
    /// towards the backlog and the lag bound like submitted ones, but an offer never waits (the next `submit`
    /// does). One task takes in whatever arrived meanwhile.
    nonisolated func offer(_ mark: DeliveryMark) {
        let schedule = inbox.withLock { box -> Bool in
            box.marks.append(mark)
            defer { box.scheduled = true }
            return !box.scheduled
        }
        if schedule { Task { await self.takeInbox() } }
    }

    private func takeInbox() {
        let marks = inbox.withLock { box -> [DeliveryMark] in
            defer {
                box.marks.removeAll(keepingCapacity: true)
                box.scheduled = false
            }
            return box.marks
        }
        enqueue(marks)
    }

    /// Returns once every mark queued so far has been written (or failed).
    func drain() async {
        takeInbox()
        guard flushing else { return }
        await withCheckedContinuation { drainWaiters.append($0) }
    }

    private func startFlushing() {
        if !flushing {
            flushing = true
            // The flush task is owned by this actor: exactly one runs while `flushing` is set.
            Task { await self.flush() }
        }
    }

    func write(_ marks: [DeliveryMark]) async throws {
        guard !marks.isEmpty else { return }
        try await withCheckedThrowingContinuation { continuation in
            pending.append((marks, continuation, clock.now))
            startFlushing()
        }
    }

    /// Writes batches until nothing is pending. Runs as the one flushing task; `flushing` guards re-entry.
    private func flush() async {
        while !pending.isEmpty {
            var taken = 0
            var count = 0
            while taken < pending.count, taken == 0 || count + pending[taken].marks.count <= maximumBatch {
                count += pending[taken].marks.count
                taken += 1
            }
            let batch = Array(pending.prefix(taken))
            pending.removeFirst(taken)
            let marks = batch.flatMap(\.marks)
            let submitted = batch.filter { $0.continuation == nil }.reduce(0) { $0 + $1.marks.count }
            do {
                try await store.applyMarks(marks)
                for (kind, group) in Dictionary(grouping: marks, by: { $0.kind.metricLabel }) {
                    metrics.ledgerWrites(kind, count: group.count)
                }
                for entry in batch { entry.continuation?.resume() }
            } catch {
                for entry in batch { entry.continuation?.resume(throwing: error) }
                if submitted > 0 {
                    // Nobody waits for these: the deliveries stay unsettled and are pushed again by the next sweep.
                    logger?.error(
                        "cannot write push outcomes; the deliveries stay unsettled",
                        metadata: ["marks": "\(submitted)", "error": "\(error)"]
                    )
                }
            }
            backlog -= submitted
            // The oldest submitted mark still waiting, if any (the batch just written is gone from `pending`).
            oldestSubmitted = pending.first(where: { $0.continuation == nil })?.at
            if backlog < maximumBacklog {
                let waiters = backlogWaiters
                backlogWaiters.removeAll()
                for waiter in waiters { waiter.resume() }
            }
        }
        flushing = false
        let drained = drainWaiters
        drainWaiters.removeAll()
        for waiter in drained { waiter.resume() }
    }
}

extension DeliveryMark.Kind {
    var metricLabel: String {
        switch self {
        case .fetched: "fetched"
        case .read: "read"
        case .pushed: "pushed"
        case .progress: "progress"
        case .settled, .noDevice: "settled"
        }
    }
}
