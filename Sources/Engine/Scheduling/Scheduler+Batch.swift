import Foundation

/// What a batch of due rows needs beside the decisions: its tenants, and the shapes of its updates and statistics.
extension Scheduler {
    /// Each tenant of the batch, once (nil: it does not exist). Once per batch, not once per due row: a `Tenant` is a
    /// dozen strings, and copying it (with its catalog) for each of thousands of rows showed in the burst's profile.
    ///
    /// A row at fire time 0 asks to be planned after a change, written with the change in one transaction: its
    /// tenant is read afresh, not from the cache, which may hold the settings from before (until this process's own
    /// write forgets them, or another node's change reaches it by the change feed). Planned with those, the row
    /// would keep the old settings until its next day.
    func tenants(of due: [ScheduleEntry]) async throws -> [TenantID: (tenant: Tenant, catalog: CatalogIndex)?] {
        for tenant in Set(due.lazy.filter { $0.fireAt.timeIntervalSince1970 == 0 }.map(\.tenant)) {
            catalog.forget(tenant)
        }
        var resolved: [TenantID: (tenant: Tenant, catalog: CatalogIndex)?] = [:]
        for entry in due where resolved[entry.tenant] == nil {
            resolved[entry.tenant] = .some(try await catalog.tenantState(entry.tenant))
        }
        return resolved
    }
}

extension ScheduleUpdate {
    /// Moves a row without recording a delivery (planning, a stale day, parking: `next` nil).
    static func move(_ entry: ScheduleEntry, to next: PlannedFire?, tally: DayTally? = nil) -> ScheduleUpdate {
        ScheduleUpdate(
            tenant: entry.tenant,
            user: entry.user,
            expectedFireAt: entry.fireAt,
            delivery: nil,
            next: next,
            tally: tally
        )
    }
}

extension SchedulerStatistics {
    mutating func add(_ other: SchedulerStatistics) {
        due += other.due
        assigned += other.assigned
        alreadyAssigned += other.alreadyAssigned
        skippedStale += other.skippedStale
        skippedNoImpulse += other.skippedNoImpulse
        remindersFired += other.remindersFired
        requeued += other.requeued
        planned += other.planned
        parked += other.parked
    }
}
