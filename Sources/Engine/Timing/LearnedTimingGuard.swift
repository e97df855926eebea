import Foundation
import Logging

/// Learned times that turned themselves off for a tenant: its holdout showed them significantly worse than fixed
/// times, read within the hour, for two weeks in a row. Every user keeps their stated time until an admin turns
/// learning back on (``LearnedTimingChanges/resume``).
public struct LearnedTimingFallback: Sendable, Equatable, Codable {
    /// The day it fell back (UTC).
    public var since: LocalDate
    /// The Mondays of the two weeks judged.
    public var weeks: [LocalDate]
    /// Why, in plain words.
    public var reason: String

    public init(since: LocalDate, weeks: [LocalDate], reason: String) {
        self.since = since
        self.weeks = weeks
        self.reason = reason
    }
}

/// The safety valve's rule (issue 45): on a day, the two complete weeks before the current one are judged; when in
/// both the learned arm reads within the hour significantly less than the holdout (the 95% interval over users
/// lies below 0), the tenant falls back to stated times.
public enum LearnedTimingGuard {
    /// The Mondays of the two weeks judged on `today`, or nil when one of them starts before `watchFrom` (learning
    /// was turned back on since).
    public static func weeks(today: LocalDate, watchFrom: LocalDate?) -> [LocalDate]? {
        let current = today.adding(days: 1 - today.isoWeekday)
        let judged = [current.adding(days: -14), current.adding(days: -7)]
        if let watchFrom, judged[0] < watchFrom { return nil }
        return judged
    }

    /// The fallback `weeks` call for, or nil.
    public static func verdict(_ weeks: [TimingWeek], judged: [LocalDate], today: LocalDate) -> LearnedTimingFallback? {
        let differences = judged.map { start in weeks.first { $0.weekStart == start }?.users.withinHour }
        guard differences.count == 2, differences.allSatisfy({ ($0?.high ?? 0) < 0 }) else { return nil }
        let parts = zip(judged, differences).map { "week of \($0.0): \($0.1?.points ?? "")" }
        return LearnedTimingFallback(
            since: today,
            weeks: judged,
            reason: "learned times were read within the hour significantly less often than the times people set, "
                + "two weeks in a row (learned minus fixed; " + parts.joined(separator: "; ") + ")"
        )
    }

    /// The Monday after `today`: learning turned back on is judged from then.
    public static func watchFrom(resumedOn today: LocalDate) -> LocalDate {
        today.adding(days: 8 - today.isoWeekday)
    }
}

/// What the safety valve reads and writes: the tenants, their holdout comparison, and a tenant's settings.
public protocol TimingGuardStore: TenantStore, EngagementStore {
    func updateTenant(_ tenant: Tenant, audit: AuditEntry) async throws
}

/// Judges every tenant that learns delivery times once an hour (issue 45) and turns learning off for one whose
/// holdout showed it significantly worse two weeks in a row; logs it, audits it, and the tenant's rows are planned
/// again at their stated times. Every node runs one; a tenant already fallen back is not judged again.
public actor LearnedTimingGuardian {
    let store: any TimingGuardStore
    let clock: any EngineClock
    let logger: Logger
    let interval: Duration
    /// Fallbacks this node made (for /inspect and tests).
    public private(set) var fallbacks = 0

    public init(
        store: any TimingGuardStore,
        clock: any EngineClock = SystemClock(),
        interval: Duration = .seconds(3600),
        logger: Logger
    ) {
        self.store = store
        self.clock = clock
        self.interval = interval
        self.logger = logger
    }

    /// Judges until cancelled; a failing store is logged and tried again at the next interval.
    public func run() async {
        while !Task.isCancelled {
            do {
                try await judge()
            } catch {
                logger.warning("learned-time safety valve could not judge", metadata: ["error": "\(error)"])
            }
            do { try await clock.sleep(for: interval) } catch { return }
        }
    }

    /// One pass over the tenants; returns the ones that fell back.
    @discardableResult
    public func judge() async throws -> [TenantID] {
        let now = clock.now
        let today = LocalDate(instant: now.timeIntervalSince1970, offsetSeconds: 0)
        var fell: [TenantID] = []
        for tenant in try await store.tenants()
        where tenant.learnedTiming.enabled && tenant.learnedTiming.fallback == nil && !tenant.suspended {
            guard let judged = LearnedTimingGuard.weeks(today: today, watchFrom: tenant.learnedTiming.watchFrom) else {
                continue
            }
            let range = try ReportRange(
                from: judged[0].description,
                to: judged[1].adding(days: 6).description,
                today: today
            )
            let records = try await store.engagement(tenant: tenant.id, from: range.from, through: range.through)
            let weeks = TimingWeek.weeks(records.timing, users: records.timingUsers, range: range)
            guard let fallback = LearnedTimingGuard.verdict(weeks, judged: judged, today: today) else { continue }
            // Read again: another node, or an admin, may have changed it meanwhile.
            guard var current = try await store.tenant(tenant.id), current.learnedTiming.enabled,
                current.learnedTiming.fallback == nil
            else { continue }
            current.learnedTiming.fallback = fallback
            try await store.updateTenant(
                current,
                audit: AuditEntry(
                    AdminActor(role: .operator, name: "learned-time safety valve"),
                    "tenant.learned-timing.fallback",
                    tenant: tenant.id,
                    target: "tenant:\(tenant.id)",
                    at: now
                )
            )
            fallbacks += 1
            fell.append(tenant.id)
            logger.warning(
                "learned delivery times fell back to stated times",
                metadata: ["tenant": "\(tenant.id)", "reason": "\(fallback.reason)"]
            )
        }
        return fell
    }
}
