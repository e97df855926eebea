import Foundation
import TestSupport
import Testing

@testable import Engine

/// Learned delivery times through the real scheduler and store: each delivery's push and read times are folded into
/// the user's evidence once, the tenant's population grows with it, the time moves toward the user's reading hour
/// at most an hour a day after the first seven deliveries, and the user's erasure removes their state.
@Suite("Learned delivery times in the store", .timeLimit(.minutes(3)))
struct LearnedTimingStoreTests {
    func utc(_ text: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: text)) }

    func scheduler(_ f: StoreFixture) -> Scheduler {
        Scheduler(
            store: f.store,
            ledger: DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store)),
            gateway: nil,
            configuration: .init(spreadWindow: .zero),
            logger: StoreFixture.logger
        )
    }

    /// The tenant learning, without a holdout; user a in UTC on the tenant's 08:00, reading each day's impulse at
    /// 11:10. Returns each delivered day's push time (UTC) in order.
    func run(_ f: StoreFixture, days: Int) async throws -> [(date: String, pushed: Date)] {
        let administration = Administration(store: f.store, hashPassword: { password, _ in password })
        _ = try await administration.updateTenant(
            f.acme,
            TenantSettings(
                defaultTimeZone: "UTC",
                learnedTiming: LearnedTimingChanges(enabled: true, holdoutShare: 0)
            ),
            by: .commandLine
        )
        let scheduler = scheduler(f)
        var now = try utc("2026-03-01T06:00:00Z")
        try await scheduler.tick(now: now)  // plans the new rows
        var pushed: [(String, Date)] = []
        while pushed.count < days {
            let entry = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
            now = entry.fireAt
            try await scheduler.tick(now: now)
            let delivery = try #require(
                try await f.store.deliveredImpulses(tenant: f.acme, user: f.a.id, after: nil, before: nil, limit: 1)
                    .first?.delivery
            )
            #expect(delivery.localDate == entry.localDate?.description)
            // The gateway's mark, as APNs accepted the push at once.
            try await f.store.applyMarks([
                DeliveryMark(
                    tenant: f.acme,
                    delivery: delivery.id,
                    kind: .pushed(apnsID: UUID().uuidString, channels: .apns),
                    at: now
                )
            ])
            pushed.append((try #require(delivery.localDate), now))
            // Read at 11:10 that day (or at once when pushed later than that).
            let day = try LocalDate(parsing: try #require(delivery.localDate))
            let read = max(Date(timeIntervalSince1970: Double(day.dayNumber * 86_400 + 11 * 3600 + 600)), now)
            try await f.store.applyMarks([DeliveryMark(tenant: f.acme, delivery: delivery.id, kind: .read, at: read)])
        }
        return pushed
    }

    @Test(
        "Eight days at the stated 08:00, then an hour a day toward the 11:00 reads; each day folded in once",
        arguments: StoreKind.allCases
    )
    func learnsTowardReads(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let pushed = try await run(f, days: 14)
        let minutes = pushed.map { Int($0.pushed.timeIntervalSince1970) % 86_400 / 60 }
        // Days 1-8 are chosen with at most seven deliveries' evidence (a day's own outcome is folded in the day
        // after it): the stated time.
        #expect(minutes.prefix(8).allSatisfy { $0 == 8 * 60 }, "\(minutes)")
        // Then toward 11:00, at most an hour from the last day of the same kind (weekday, weekend): Friday the
        // 13th is there; Saturday the 14th moves from Sunday the 8th's 08:00 by one step.
        let dates = try pushed.map { try LocalDate(parsing: $0.date) }
        for index in minutes.indices {
            let kind = DayKind(isoWeekday: dates[index].isoWeekday)
            guard let last = dates[..<index].lastIndex(where: { DayKind(isoWeekday: $0.isoWeekday) == kind }) else {
                continue
            }
            #expect(abs(minutes[index] - minutes[last]) <= 60, "\(minutes)")
        }
        #expect(pushed[12].date == "2026-03-13" && minutes[12] == 11 * 60, "\(minutes)")
        #expect(pushed[13].date == "2026-03-14" && minutes[13] == 9 * 60, "\(minutes)")
        #expect(minutes[8] > 8 * 60, "\(minutes)")

        // Thirteen days are folded (the fourteenth is not over), each once, with its read.
        let timing = try #require(try await f.store.userTiming(tenant: f.acme, user: f.a.id))
        #expect(timing.evidence.deliveries() == 13)
        #expect(timing.evidence.totalReads == 13)
        #expect(timing.foldedThrough?.description == pushed[12].date)
        // The next day's plan (Sunday the 15th, a step on from Saturday) and why: learned from thirteen reads.
        #expect(timing.planned?.date.description == "2026-03-15")
        #expect(timing.planned?.reason == .learned(reads: 13, deliveries: 13))
        #expect(timing.planned?.time.description == "10:00")
        // The tenant's population holds the reads seen where pushed (within the hour before 11:10), not those
        // inferred (user b's deliveries are never read: they add misses only).
        let population = try await f.store.timingBatch(tenant: f.acme, users: [f.a.id], since: LocalDate(dayNumber: 0))
            .population
        let withinHour = minutes.prefix(13).filter { (10 * 60 + 10...11 * 60 + 10).contains($0) }.count
        #expect(withinHour > 0 && population.reads.joined().reduce(0, +) == Double(withinHour), "\(minutes)")

        // The holdout comparison counts each folded day once: no holdout, so all of them are the learned arm's.
        let records = try await f.store.engagement(
            tenant: f.acme,
            from: try LocalDate(parsing: pushed[0].date),
            through: try LocalDate(parsing: pushed[13].date)
        )
        var learned = TimingArmCounts()
        var holdout = TimingArmCounts()
        for counts in records.timing.values {
            learned.add(counts.learned)
            holdout.add(counts.holdout)
        }
        #expect(learned.deliveries == 13 && learned.read == 13 && holdout.deliveries == 0)
        #expect(records.timing[pushed[13].date] == nil)

        // Another scheduler deciding the same rows again folds nothing twice.
        try await scheduler(f).tick(now: pushed.last!.pushed)
        #expect(try await f.store.userTiming(tenant: f.acme, user: f.a.id)?.evidence.deliveries() == 13)
        let again = try await f.store.engagement(
            tenant: f.acme,
            from: try LocalDate(parsing: pushed[0].date),
            through: try LocalDate(parsing: pushed[13].date)
        )
        #expect(again.timing == records.timing)

        // The user's erasure removes their state.
        _ = try await f.store.deleteUser(
            tenant: f.acme,
            user: f.a.id,
            audit: AuditEntry(.commandLine, "user.delete", tenant: f.acme, target: "user:a")
        )
        #expect(
            try await f.texts("SELECT CAST(user_id AS TEXT) FROM user_timing WHERE user_id = \(f.a.id.rawValue)")
                .isEmpty
        )
    }

    @Test(
        "A stale compare-and-set folds nothing; of two nodes writing the same version, one lands",
        arguments: StoreKind.allCases
    )
    func foldsOnce(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        _ = try await run(f, days: 3)
        let before = try #require(try await f.store.userTiming(tenant: f.acme, user: f.a.id))
        var stale = before
        stale.version -= 1
        var added = ReadEvidence()
        added.observe(TimingSlot(20), .weekday, read: true)
        stale.evidence.add(added)
        let entry = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        var update = ScheduleUpdate.move(entry, to: nil)
        update.timing = TimingWrite(timing: stale, added: added)
        _ = try await f.store.commitSchedules([update])
        let after = try #require(try await f.store.userTiming(tenant: f.acme, user: f.a.id))
        #expect(after.evidence == before.evidence)
        #expect(after.version == before.version)

        // Two nodes that read the same version (another node's store: its own connections, only the database
        // shared) both write: the first lands, the second folds nothing, and the population counts the day once.
        let other = try await StoreFixture.open(kind, f.location)
        let readsBefore = try await f.store.timingBatch(tenant: f.acme, users: [f.a.id], since: LocalDate(dayNumber: 0))
            .population.reads[0][20]
        var fresh = after
        fresh.evidence.add(added)
        var both = ScheduleUpdate.move(entry, to: nil)
        both.timing = TimingWrite(timing: fresh, added: added)
        _ = try await other.commitSchedules([both])
        _ = try await f.store.commitSchedules([both])
        let landed = try #require(try await f.store.userTiming(tenant: f.acme, user: f.a.id))
        #expect(landed.version == after.version + 1)
        #expect(landed.evidence == fresh.evidence)
        let readsAfter = try await f.store.timingBatch(tenant: f.acme, users: [f.a.id], since: LocalDate(dayNumber: 0))
            .population.reads[0][20]
        #expect(readsAfter == readsBefore + 1)
    }

    @Test(
        "The comparison's users' weeks: eligible outcomes only, once per landed fold, read back by the report, gone with the user",
        arguments: StoreKind.allCases
    )
    func userWeeks(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        _ = try await run(f, days: 1)
        let timing = try #require(try await f.store.userTiming(tenant: f.acme, user: f.a.id))
        let entry = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        let monday = try LocalDate(parsing: "2026-11-23")
        let outcomes = [
            TimingOutcomeCount(day: monday, holdout: true, bucket: 2),  // read in 5-15 minutes
            TimingOutcomeCount(day: monday.adding(days: 1), holdout: true, bucket: 6),  // read hours later
            TimingOutcomeCount(day: monday.adding(days: 2), holdout: true, bucket: nil),  // not read
            TimingOutcomeCount(day: monday.adding(days: 3), holdout: true, bucket: 1, eligible: false),
        ]
        var update = ScheduleUpdate.move(entry, to: nil)
        update.timing = TimingWrite(timing: timing, added: ReadEvidence(), outcomes: outcomes)
        _ = try await f.store.commitSchedules([update])
        // The same write again is a stale compare-and-set: nothing counted twice.
        _ = try await f.store.commitSchedules([update])
        let records = try await f.store.engagement(
            tenant: f.acme,
            from: monday.adding(days: 2),
            through: monday.adding(days: 6)
        )
        #expect(
            records.timingUsers == [
                TimingUserWeek(user: f.a.id, week: monday, holdout: true, deliveries: 3, withinHour: 1, read: 2)
            ]
        )
        // The day counts leave the ineligible one out as well.
        let days = try await f.store.engagement(tenant: f.acme, from: monday, through: monday.adding(days: 6)).timing
        #expect(days.values.reduce(0) { $0 + $1.holdout.deliveries } == 3)
        _ = try await f.store.deleteUser(
            tenant: f.acme,
            user: f.a.id,
            audit: AuditEntry(.commandLine, "user.delete", tenant: f.acme, target: "user:a")
        )
        #expect(try await f.store.engagement(tenant: f.acme, from: monday, through: monday).timingUsers.isEmpty)
    }
}
