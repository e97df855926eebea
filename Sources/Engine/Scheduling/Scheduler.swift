import Foundation
import Logging
import Synchronization

/// The daily dispatch: takes due rows from the store's index, decides with ``DispatchPlanner``, chooses with
/// ``ImpulseSelector``, records each day's assignment durably, and only then hands it to the push gateway.
///
/// Exactly once per user and local day rests on the store's unique (tenant, user, local date) key, not on this
/// process: after a crash the row is due again and its day either records nothing (it was recorded) or is
/// recorded now. Deliveries recorded but not yet pushed are pushed again at start, under the same collapse id.
/// Backpressure: `enqueue` suspends while the tenant's push queue is full, so the scheduler reads the index
/// only as fast as APNs takes pushes, and memory holds one batch.
public actor Scheduler {
    let store: any SchedulerStore
    private let ledger: DeliveryLedger
    let gateway: PushGateway?
    let configuration: SchedulerConfiguration
    let planner: DispatchPlanner
    private let selector = ImpulseSelector()
    let logger: Logger
    /// The push mode the loop last acted on (``PushHealth``).
    var lastPushMode = PushHealth.Mode.pushing
    private let metrics: BrokerMetrics
    private let counters = Mutex(SchedulerStatistics())
    /// Tenants and impulses: the ledger's, the one cache of them in the process.
    let catalog: CatalogCache
    /// Failed passes in a row (a full disk, a store that is down): they pause the dispatch, doubling, jittered.
    private var streak: FailureStreak
    /// The streak as inspection sees it, readable without waiting for the actor.
    private let health = Mutex(SchedulerHealth())
    /// The time the loop plans by and pauses on (a test's ``EngineClock`` moves it by hand).
    let clock: any EngineClock

    public init(
        store: any SchedulerStore,
        ledger: DeliveryLedger,
        gateway: PushGateway?,
        configuration: SchedulerConfiguration = .init(),
        logger: Logger,
        metrics: BrokerMetrics = .disabled,
        clock: any EngineClock = SystemClock()
    ) {
        self.clock = clock
        self.store = store
        self.ledger = ledger
        self.gateway = gateway
        self.catalog = ledger.catalog
        self.configuration = configuration
        self.planner = DispatchPlanner(staleness: configuration.staleness, spreadWindow: configuration.spreadWindow)
        self.logger = logger
        self.metrics = metrics
        self.streak = FailureStreak(
            initialBackoff: configuration.failureBackoff,
            maximumBackoff: configuration.maximumFailureBackoff
        )
    }

    /// Set when another node has gone and left deliveries to push: the next loop sweeps at once.
    private let sweepRequested = Mutex(false)

    /// Asks for a sweep of unsettled deliveries at the next turn of the loop, not at the next `sweepInterval`
    /// (another node has gone; its deliveries are free to take).
    public nonisolated func sweepSoon() {
        sweepRequested.withLock { $0 = true }
    }

    /// What the scheduler did so far; readable at any time without waiting for the actor.
    public nonisolated var statistics: SchedulerStatistics { counters.withLock { $0 } }

    /// Whether the dispatch is failing, since when and why; readable at any time without waiting for the actor.
    public nonisolated var currentHealth: SchedulerHealth { health.withLock { $0 } }

    /// Pushes what an earlier run left unpushed, then dispatches until the task is cancelled. A batch in
    /// progress when cancelled is either committed or not at all; its pushes are handed back to the next start.
    public func run() async {
        // The dispatch is not failing until a pass fails: say so from the start.
        publishHealth()
        do {
            let limit = store.leasesUnsettledDeliveries ? configuration.sweepShare : .max
            if try await requeueUnsettled(now: clock.now, limit: limit).leased >= limit { sweepSoon() }
        } catch is CancellationError {
            return
        } catch {
            logger.error("cannot read unpushed deliveries", metadata: ["error": "\(error)"])
        }
        var lastSweep = ContinuousClock.now
        while !Task.isCancelled {
            // A node that cannot push takes nothing (holding), or a probe's share (probing).
            let share = await pushShare()
            guard let share else {
                do { try await clock.sleep(for: configuration.pollInterval) } catch { break }
                continue
            }
            let requested = sweepRequested.withLock { requested in
                defer { requested = false }
                return requested
            }
            if requested || lastSweep.duration(to: .now) >= configuration.sweepInterval {
                lastSweep = .now
                do {
                    // Deliveries assigned in the last two minutes may be in this node's pipeline; a store that leases
                    // them leaves out those being pushed by itself.
                    let settleTime: Duration = store.leasesUnsettledDeliveries ? .zero : .seconds(120)
                    // A store that does not lease returns the same first rows again: it is read whole.
                    let limit =
                        !store.leasesUnsettledDeliveries
                        ? .max
                        : share.probing ? configuration.probeShare : configuration.sweepShare
                    let swept = try await requeueUnsettled(now: clock.now, settleTime: settleTime, limit: limit)
                    // A full share: more may be left; this node takes another once its queue has room.
                    if swept.leased >= limit, !share.probing { sweepSoon() }
                } catch {
                    logger.warning("cannot read unpushed deliveries", metadata: ["error": "\(error)"])
                }
            }
            var processed = 0
            do {
                processed = try await pipelinedTick(now: clock.now, limit: share.batch)
            } catch is CancellationError {
                await settlePipeline()
                return
            } catch {
                cursor = nil
                failed(error)
            }
            // A full batch: read on while it commits (unless something failed, or it was a probe's).
            if processed >= share.batch, !passFailed, !share.probing { continue }
            // The end of a pass over the due rows, or a failure: let the last batch land first.
            await settlePipeline()
            if passFailed {
                // A failed read or commit: the rows are still due. Back off before reading them again.
                passFailed = false
                let pause = streak.backoff(jitter: Double.random(in: 0.5...1.5))
                do { try await clock.sleep(for: pause) } catch { return }
                continue
            }
            cursor = nil
            var pause = configuration.pollInterval
            if let next = try? await store.nextFireTime() {
                let until = Duration.milliseconds(Int64(max(0, next.timeIntervalSince(clock.now)) * 1000))
                pause = min(pause, until)
            }
            // Nothing taken although something is due (rows another node claimed in between): no busy loop.
            if processed == 0 { pause = max(pause, .milliseconds(50)) }
            do { try await clock.sleep(for: pause) } catch { return }
        }
        await settlePipeline()
    }

    /// Where the current pass over the due rows is, and the batches being committed while the next is decided,
    /// oldest first.
    private var cursor: ScheduleCursor?
    private var committing: [Task<Void, Never>] = []

    /// Like `tick`, but the batch's commit and pushes run while the next batch is read and decided: reading and
    /// choosing (this actor) overlap with the write transactions and the push preparation, so a burst uses both
    /// cores. At most the store's `concurrentCommits` batches are committing; a later batch never includes their rows, because
    /// it reads after the cursor. (Should a commit fail while a later one is still in flight, the pass starts
    /// again from the first due row and may decide that later batch's rows twice: its commit's compare-and-set
    /// on the fire time and the daily key keep the second decision from moving a row or recording a day again.)
    private func pipelinedTick(now: Date, limit: Int) async throws -> Int {
        let due = try await store.dueSchedules(notAfter: now, after: cursor, limit: limit)
        let reminders = try await store.dueReminders(notAfter: now, limit: limit)
        if let last = due.last {
            let decided = try await decide(due, now: now)
            while committing.count >= max(1, store.concurrentCommits) {
                await committing.removeFirst().value
            }
            cursor = ScheduleCursor(fireAt: last.fireAt, user: last.user)
            committing.append(
                Task {
                    do {
                        try await self.finish(decided)
                        self.succeeded()
                    } catch is CancellationError {
                        // Stopping: the rows stay due and the deliveries unpushed; the next start takes them.
                    } catch {
                        self.commitFailed(error)
                    }
                }
            )
        }
        if !reminders.isEmpty { try await fire(reminders, now: now) }
        // Reads work and nothing had to be written, or the reminders were: the store is healthy.
        if !reminders.isEmpty || due.isEmpty { succeeded() }
        return max(due.count, reminders.count)
    }

    /// Waits for the batches being committed, if any.
    func settlePipeline() async {
        while !committing.isEmpty {
            let oldest = committing.removeFirst()
            if Task.isCancelled { oldest.cancel() }
            await oldest.value
        }
    }

    /// Starts the next pass from the first due row.
    func resetCursor() {
        cursor = nil
    }

    private func commitFailed(_ error: any Error) {
        // Its rows are still due: the next pass reads them again.
        cursor = nil
        failed(error)
    }

    /// Whether a read or commit failed since the run loop last backed off.
    private var passFailed = false

    /// Counts a failure; the first of a streak is logged (with the error), the others only counted.
    private func failed(_ error: any Error) {
        passFailed = true
        metrics.schedulerFailure()
        let transition = streak.failed("\(error)", at: .now)
        publishHealth()
        if case .startedFailing(let description) = transition {
            logger.error(
                "dispatch failing; retrying with backoff (logged again when it recovers)",
                metadata: ["error": "\(description)"]
            )
        }
    }

    private func succeeded() {
        guard case .recovered(let failures, let duration) = streak.succeeded(at: .now) else { return }
        publishHealth()
        logger.notice(
            "dispatch recovered",
            metadata: ["failures": "\(failures)", "failing_ms": "\(Int(duration / .milliseconds(1)))"]
        )
    }

    private func publishHealth() {
        let failing = streak.isFailing
        let view = SchedulerHealth(
            consecutiveFailures: streak.failures,
            failingSince: failing
                ? clock.now.addingTimeInterval(-(streak.since?.duration(to: .now).seconds ?? 0)) : nil,
            lastError: streak.lastError
        )
        health.withLock { $0 = view }
        metrics.schedulerFailing(failing)
    }

    /// Processes what is due at `now`: at most one batch of rows and one of reminders. Returns how many rows
    /// and reminders it took.
    @discardableResult
    public func tick(now: Date) async throws -> Int {
        let due = try await store.dueSchedules(notAfter: now, limit: configuration.batchSize)
        let reminders = try await store.dueReminders(notAfter: now, limit: configuration.batchSize)
        if !due.isEmpty { try await dispatch(due, now: now) }
        if !reminders.isEmpty { try await fire(reminders, now: now) }
        return max(due.count, reminders.count)
    }

    private func fire(_ reminders: [Reminder], now: Date) async throws {
        let due = Dictionary(reminders.map { ($0.user, $0.fireAt) }, uniquingKeysWith: min)
        var reportDays: [TenantID: String] = [:]
        for tenant in Set(reminders.map(\.tenant)) {
            if let zone = try await tenantState(tenant)?.tenant.defaultTimeZone {
                reportDays[tenant] = NewDelivery.reportDay(assignedAt: now, zone: zone)
            }
        }
        let recorded = try await ledger.fire(reminders, at: now, reportDays: reportDays).map { delivery in
            var delivery = delivery
            delivery.dueAt = due[delivery.user]
            return delivery
        }
        counters.withLock { $0.remindersFired += recorded.count }
        metrics.dispatched("reminder", count: recorded.count)
        try await push(recorded)
    }

    /// Hands deliveries recorded but never settled by the push gateway (the process stopped, or APNs kept failing)
    /// to it again; those assigned less than `settleTime` ago are left alone (their outcome may be in flight).
    /// Takes at most `limit` (on a shared store, leases at most that many). Returns how many were read (and, on a
    /// shared store, leased) and how many queued.
    @discardableResult
    public func requeueUnsettled(
        now: Date,
        settleTime: Duration = .zero,
        limit: Int = .max
    ) async throws -> (leased: Int, queued: Int) {
        guard gateway != nil else { return (0, 0) }
        let since = now.addingTimeInterval(-configuration.staleness.seconds)
        try await giveUpStale(before: since)
        var after: DeliveryID?
        var read = 0
        var total = 0
        while read < limit {
            let page = try await store.unsettledDeliveries(
                assignedAfter: since,
                after: after,
                limit: min(1000, limit - read)
            )
            guard let last = page.last else { break }
            after = last.id
            read += page.count
            let settled = now.addingTimeInterval(-settleTime.seconds)
            let queued = try await push(page.filter { $0.assignedAt <= settled })
            total += queued
            counters.withLock { $0.requeued += queued }
            metrics.dispatched("requeued", count: queued)
        }
        if total > 0 {
            logger.notice("pushing deliveries a previous run left unpushed", metadata: ["count": "\(total)"])
        }
        return (read, total)
    }

    /// Settles what the sweep no longer pushes: deliveries unsettled for longer than `staleness` (a device whose
    /// channel kept failing all that time, or a node that was down). Each is counted, per tenant, in
    /// `broker_push_given_up_total`, logged, and in the reports (failed, when none of its devices took it).
    private func giveUpStale(before: Date) async throws {
        var given: [TenantID: Int] = [:]
        while true {
            let round = try await store.giveUpUnsettled(assignedBefore: before, limit: 1000)
            given.merge(round, uniquingKeysWith: +)
            if round.values.reduce(0, +) < 1000 { break }
        }
        for (tenant, count) in given.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            metrics.givenUp(tenant: tenant, count: count)
            logger.warning(
                "gave up pushing deliveries unsettled for longer than the staleness limit; they count as failed where no device took them",
                metadata: [
                    "tenant.id": "\(tenant)", "count": "\(count)",
                    "staleness_s": "\(configuration.staleness.components.seconds)",
                ]
            )
        }
    }

    /// When the earliest row or reminder is due, and how late the scheduler is (how long the oldest due row has
    /// waited), for inspection.
    public func lag(now: Date = Date()) async throws -> (nextDue: Date?, lagSeconds: Double) {
        let next = try await store.nextFireTime()
        // A row at fire time 0 only asks to be planned: it is not late.
        guard let next, next.timeIntervalSince1970 > 0 else { return (next, 0) }
        return (next, max(0, now.timeIntervalSince(next)))
    }

    /// One batch's decisions, not yet committed.
    struct Decided: Sendable {
        var updates: [ScheduleUpdate]
        var statistics: SchedulerStatistics
        var dueAt: [UserID: Date]
    }

    private func dispatch(_ due: [ScheduleEntry], now: Date) async throws {
        try await finish(try await decide(due, now: now))
    }

    /// Plans each due row and chooses the impulses of those whose day has come (reads only).
    private func decide(_ due: [ScheduleEntry], now: Date) async throws -> Decided {
        var updates: [ScheduleUpdate] = []
        var deliverable: [(entry: ScheduleEntry, date: LocalDate, next: PlannedFire?, tally: DayTally?)] = []
        var statistics = SchedulerStatistics()
        let resolved = try await tenants(of: due)
        // Tenants that learn delivery times: each row gets its user's state, with the days since folded in.
        let (due, folded) = try await learnedTiming(due, tenants: resolved.compactMapValues { $0?.tenant }, now: now)
        for entry in due {
            guard let tenant = (resolved[entry.tenant] ?? nil)?.tenant else {
                updates.append(.move(entry, to: nil))
                continue
            }
            let action = planner.decide(entry, tenant: tenant, now: now)
            switch action {
            case .deliver(let date, let next):
                deliverable.append((entry, date, next, planner.tally(action, entry, tenant: tenant)))
            case .skipStale(let date, let next):
                statistics.due += 1
                statistics.skippedStale += 1
                logger.info(
                    "day skipped: its time passed longer ago than the staleness limit",
                    metadata: ["tenant.id": "\(entry.tenant)", "user.id": "\(entry.user)", "local.date": "\(date)"]
                )
                updates.append(.move(entry, to: next, tally: planner.tally(action, entry, tenant: tenant)))
            case .plan(let next):
                statistics.planned += 1
                updates.append(.move(entry, to: next))
            case .park:
                statistics.parked += 1
                updates.append(.move(entry, to: nil))
            }
        }
        let since = now.addingTimeInterval(-Double(configuration.repeatWindowDays) * 86_400)
        for (tenantID, group) in Dictionary(grouping: deliverable, by: \.entry.tenant) {
            // Resolved above: every deliverable row's tenant exists.
            guard let state = resolved[tenantID] ?? nil else { continue }
            let catalog = state.catalog
            let histories = try await store.selectionHistories(
                tenant: tenantID,
                users: group.map(\.entry.user),
                since: since
            )
            for item in group {
                statistics.due += 1
                let impulse = selector.choose(
                    from: catalog,
                    tenant: state.tenant,
                    user: item.entry.user,
                    language: item.entry.language,
                    scores: item.entry.lifeAreas,
                    date: item.date,
                    history: histories[item.entry.user] ?? SelectionHistory()
                )
                if impulse == nil {
                    statistics.skippedNoImpulse += 1
                    logger.warning(
                        "nothing to deliver: the tenant's catalog has no impulse for the user",
                        metadata: ["tenant.id": "\(tenantID)", "user.id": "\(item.entry.user)"]
                    )
                }
                updates.append(
                    .init(
                        tenant: tenantID,
                        user: item.entry.user,
                        expectedFireAt: item.entry.fireAt,
                        delivery: impulse.map {
                            NewDelivery(
                                tenant: tenantID,
                                user: item.entry.user,
                                impulse: $0.id,
                                kind: .scheduled,
                                localDate: item.date.description,
                                assignedAt: now,
                                awaitsPush: gateway != nil
                            )
                        },
                        next: item.next,
                        tally: item.tally
                    )
                )
            }
        }
        if !folded.isEmpty {
            let entries = Dictionary(due.map { ($0.user, $0) }, uniquingKeysWith: { $1 })
            for index in updates.indices {
                let update = updates[index]
                guard let write = folded[update.user], let entry = entries[update.user],
                    let tenant = (resolved[update.tenant] ?? nil)?.tenant
                else { continue }
                updates[index].timing = Self.timingWrite(write, entry, update.next, planner, tenant)
            }
        }
        let dueAt = Dictionary(due.map { ($0.user, $0.fireAt) }, uniquingKeysWith: min)
        return Decided(updates: updates, statistics: statistics, dueAt: dueAt)
    }

    /// Commits a batch's decisions in one transaction, then hands its new deliveries to the push gateway.
    private func finish(_ decided: Decided) async throws {
        let updates = decided.updates
        var statistics = decided.statistics
        let recorded = try await ledger.commit(updates).map { delivery in
            var delivery = delivery
            delivery.dueAt = decided.dueAt[delivery.user]
            return delivery
        }
        let attempted = updates.filter { $0.delivery != nil }.count
        statistics.assigned = recorded.count
        statistics.alreadyAssigned = attempted - recorded.count
        counters.withLock { $0.add(statistics) }
        metrics.dispatched("assigned", count: statistics.assigned)
        metrics.dispatched("already_assigned", count: statistics.alreadyAssigned)
        metrics.dispatched("skipped_stale", count: statistics.skippedStale)
        metrics.dispatched("skipped_no_impulse", count: statistics.skippedNoImpulse)
        try await push(recorded)
    }

    /// Hands deliveries to the push gateway; returns how many it queued (it ignores ones already pending).
    @discardableResult
    private func push(_ deliveries: [Delivery]) async throws -> Int {
        guard let gateway else { return 0 }
        var queued = 0
        // Devices and badges for the whole batch in a few statements, so a push costs the gateway no store read.
        for (tenant, group) in Dictionary(grouping: deliveries, by: \.tenant) {
            let targets = try await store.pushTargets(tenant: tenant, users: Array(Set(group.map(\.user))))
            queued += await gateway.enqueue(contentsOf: group.map { ($0, targets[$0.user]) })
            try Task.checkCancellation()
        }
        return queued
    }

    private func tenantState(_ id: TenantID) async throws -> (tenant: Tenant, catalog: CatalogIndex)? {
        try await catalog.tenantState(id)
    }
}
