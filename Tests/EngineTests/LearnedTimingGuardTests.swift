import Foundation
import TestSupport
import Testing

@testable import Engine

/// The learned-time safety valve on a real store (issue 45, item 5): a tenant whose holdout shows learned times
/// significantly worse two weeks in a row falls back to stated times by itself, audited; an admin turns it back on
/// and it is judged again only from the next Monday.
@Suite("Learned-time safety valve")
struct LearnedTimingGuardTests {
    /// 30 users per arm with a week of seven deliveries each in both weeks: the learned arm reads `learned` of them
    /// within the hour, the holdout five.
    func fill(_ f: StoreFixture, weeks: [LocalDate], learned: [Int]) async throws {
        var updates: [ScheduleUpdate] = []
        let users = try await f.store.createUsers(
            try (0..<60).map { try NewUser(tenant: f.acme, username: "valve-\($0)", passwordHash: "x") }
        )
        for (index, user) in users.enumerated() {
            let holdout = index >= 30
            var outcomes: [TimingOutcomeCount] = []
            for (week, start) in weeks.enumerated() {
                let read = holdout ? 5 : learned[week]
                outcomes += (0..<7).map { day in
                    TimingOutcomeCount(day: start.adding(days: day), holdout: holdout, bucket: day < read ? 2 : nil)
                }
            }
            let entry = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: user.id))
            var update = ScheduleUpdate.move(entry, to: nil)
            update.timing = TimingWrite(timing: UserTiming(), added: ReadEvidence(), outcomes: outcomes)
            updates.append(update)
        }
        _ = try await f.store.commitSchedules(updates)
    }

    /// A store whose tenant acme learns times, on Thursday 2026-12-03 (the weeks judged: 2026-11-16 and -23).
    func learning(_ kind: StoreKind) async throws -> (StoreFixture, ManualClock, Administration) {
        let f = try await StoreFixture.make(kind)
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_796_299_200))
        let administration = Administration(
            store: f.store,
            hashPassword: { password, _ in password },
            now: { clock.now }
        )
        _ = try await administration.updateTenant(
            f.acme,
            TenantSettings(learnedTiming: LearnedTimingChanges(enabled: true)),
            by: .commandLine
        )
        return (f, clock, administration)
    }

    @Test(
        "Two bad weeks: learning falls back, audited, every user on the stated time; resumed, judged from next Monday",
        arguments: StoreKind.allCases
    )
    func fallsBackAndResumes(_ kind: StoreKind) async throws {
        let (f, clock, administration) = try await learning(kind)
        let weeks = [try LocalDate(parsing: "2026-11-16"), try LocalDate(parsing: "2026-11-23")]
        try await fill(f, weeks: weeks, learned: [1, 2])
        let guardian = LearnedTimingGuardian(store: f.store, clock: clock, logger: StoreFixture.logger)
        #expect(try await guardian.judge() == [f.acme])
        let tenant = try #require(try await f.store.tenant(f.acme))
        let fallback = try #require(tenant.learnedTiming.fallback, "\(tenant.learnedTiming)")
        #expect(fallback.since.description == "2026-12-03" && fallback.weeks == weeks)
        #expect(tenant.learnedTiming.enabled && !tenant.learnedTiming.learning)
        let audit = try await f.store.auditEntries(tenant: f.acme, before: nil, limit: 5)
        #expect(audit.first?.action == "tenant.learned-timing.fallback", "\(audit)")
        // Every user gets the stated time, saying why.
        var subject = LearnedTiming.Subject(tenant: f.acme, user: f.a.id, stated: try LocalTime(parsing: "08:00"))
        subject.evidence.observe(TimingSlot(20), .weekday, read: true)
        let choice = tenant.learnedTiming.choose(for: subject, on: weeks[1], prior: PopulationPrior(ReadEvidence()))
        #expect(choice == SendTimeChoice(time: subject.stated, reason: .fallback))
        // Judged again: nothing more (it has fallen back).
        #expect(try await guardian.judge().isEmpty)
        // Turned back on: cleared, and the same weeks do not trip it again.
        let resumed = try await administration.updateTenant(
            f.acme,
            TenantSettings(learnedTiming: LearnedTimingChanges(resume: true)),
            by: .commandLine
        )
        #expect(resumed.learnedTiming.fallback == nil && resumed.learnedTiming.watchFrom?.description == "2026-12-07")
        #expect(try await guardian.judge().isEmpty)
        #expect(try await f.store.tenant(f.acme)?.learnedTiming.learning == true)
    }

    @Test("One bad week and one even week: learning goes on", arguments: StoreKind.allCases)
    func oneBadWeek(_ kind: StoreKind) async throws {
        let (f, clock, _) = try await learning(kind)
        try await fill(
            f,
            weeks: [try LocalDate(parsing: "2026-11-16"), try LocalDate(parsing: "2026-11-23")],
            learned: [1, 5]
        )
        let guardian = LearnedTimingGuardian(store: f.store, clock: clock, logger: StoreFixture.logger)
        #expect(try await guardian.judge().isEmpty)
        #expect(try await f.store.tenant(f.acme)?.learnedTiming.fallback == nil)
    }
}
