import Foundation

/// Learned delivery times in the dispatch (issue 36): the state a batch's rows need, folded from the ledger, and
/// what a decision writes back.
extension Scheduler {
    /// Reads the learned-time state of the rows whose tenants learn times, folds the days that ended into it, and
    /// gives each row its ``TimingInputs``. Returns the rows and, by user, the folded state with what it added.
    func learnedTiming(
        _ due: [ScheduleEntry],
        tenants: [TenantID: Tenant],
        now: Date
    ) async throws -> ([ScheduleEntry], [UserID: TimingWrite]) {
        let learning = Set(tenants.values.filter(\.learnedTiming.enabled).map(\.id))
        guard due.contains(where: { learning.contains($0.tenant) }) else { return (due, [:]) }
        var due = due
        var folded: [UserID: TimingWrite] = [:]
        // A tenant that starts learning learns from the last eight weeks of its ledger.
        let since = LocalDate(instant: now.timeIntervalSince1970, offsetSeconds: 0).adding(days: -57)
        for tenantID in learning {
            guard let tenant = tenants[tenantID] else { continue }
            let indices = due.indices.filter { due[$0].tenant == tenantID }
            let batch = try await store.timingBatch(
                tenant: tenantID,
                users: indices.map { due[$0].user },
                since: since
            )
            let prior = PopulationPrior(batch.population, smoothingMinutes: tenant.learnedTiming.smoothingMinutes)
            for index in indices {
                let entry = due[index]
                let zone = planner.schedule(for: entry, tenant: tenant).timeZone
                let today = LocalDate(
                    instant: now.timeIntervalSince1970,
                    offsetSeconds: zone.secondsFromGMT(for: now)
                )
                // A day is folded in once it is over: before the day being delivered, and before today.
                let cutoff = min(today, entry.localDate ?? today)
                let (timing, added, counts) = (batch.users[entry.user] ?? UserTiming()).folding(
                    batch.outcomes[entry.user] ?? [],
                    before: cutoff,
                    in: zone,
                    holdout: tenant.learnedTiming.isHoldout(tenant: tenantID, user: entry.user),
                    // The model may move a user unless they keep a time they set themselves.
                    eligible: entry.preferences.deliveryTime == nil || (batch.users[entry.user]?.optedIn ?? false),
                    model: tenant.learnedTiming
                )
                folded[entry.user] = TimingWrite(timing: timing, added: added, outcomes: counts)
                due[index].timing = TimingInputs(
                    evidence: timing.evidence,
                    previous: timing.previous,
                    optedIn: timing.optedIn,
                    prior: prior
                )
            }
        }
        return (due, folded)
    }

    /// A row's learned-time write: the folded state, and the day it moves to planned at the model's time.
    static func timingWrite(
        _ folded: TimingWrite,
        _ entry: ScheduleEntry,
        _ next: PlannedFire?,
        _ planner: DispatchPlanner,
        _ tenant: Tenant
    ) -> TimingWrite {
        var write = folded
        if let next, let learned = planner.schedule(for: entry, tenant: tenant).learned {
            write.timing = write.timing.planning(next.date, learned.choice(for: next.date))
        }
        return write
    }
}
