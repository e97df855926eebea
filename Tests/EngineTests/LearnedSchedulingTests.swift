import Foundation
import Testing

@testable import Engine

/// The dispatch planner with a tenant that learns delivery times: the model picks each day's wall time, the
/// schedule resolves it as it does a stated one (zones, daylight saving, quiet hours, weekdays).
@Suite("Dispatch planner with learned times")
struct LearnedSchedulingTests {
    let planner = DispatchPlanner(staleness: .seconds(6 * 3600), spreadWindow: .zero)

    func utc(_ text: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: text)) }
    func day(_ text: String) throws -> LocalDate { try LocalDate(parsing: text) }
    func time(_ text: String) throws -> LocalTime { try LocalTime(parsing: text) }

    func tenant(
        learning: Bool,
        weekdays: [Int] = [1, 2, 3, 4, 5, 6, 7],
        quiet: String? = nil,
        deliveryTime: String = "08:00"
    ) throws -> Tenant {
        var tenant = try Tenant(
            id: TenantID("acme"),
            name: "Acme",
            defaultTimeZone: "Europe/Berlin",
            defaultDeliveryTime: try time(deliveryTime),
            defaultQuietHours: try quiet.map { try QuietHours(parsing: $0) },
            weekdays: try Weekdays(weekdays)
        )
        tenant.learnedTiming = LearnedTiming(enabled: learning, holdoutShare: 0)
        return tenant
    }

    /// Ten weekday and ten weekend pushes at `pushed`, each read at `read` (hours later: the user reads then).
    func readsLate(pushed: String, read: String) throws -> ReadEvidence {
        var evidence = ReadEvidence()
        for kind in DayKind.allCases {
            for _ in 0..<10 { evidence.observe(pushedAt: try time(pushed), readAt: try time(read), kind) }
        }
        return evidence
    }

    func entry(
        _ tenant: Tenant,
        last: String,
        time stated: String? = nil,
        evidence: ReadEvidence,
        previous: String,
        optedIn: Bool = false
    ) throws -> ScheduleEntry {
        ScheduleEntry(
            tenant: tenant.id,
            user: UserID(1),
            fireAt: Date(timeIntervalSince1970: 0),
            localDate: nil,
            lastDate: try day(last),
            preferences: DeliveryPreferences(
                timeZone: "Europe/Berlin",
                deliveryTime: try stated.map { try time($0) }
            ),
            timing: TimingInputs(
                evidence: evidence,
                previous: [try time(previous), try time(previous)],
                optedIn: optedIn
            )
        )
    }

    @Test("A user who reads at 09:35 is planned at 09:30 in their zone, on both sides of a daylight-saving change")
    func learnedHalfHour() throws {
        let learning = try tenant(learning: true)
        let evidence = try readsLate(pushed: "08:00", read: "09:35")
        // Planned on the 23rd for the 24th (CEST, UTC+2), and on the 24th for the 25th (CET, UTC+1).
        let before = try entry(learning, last: "2026-10-23", evidence: evidence, previous: "09:00")
        let planned = planner.decide(before, tenant: learning, now: try utc("2026-10-23T12:00:00Z"))
        #expect(
            planned == .plan(next: PlannedFire(date: try day("2026-10-24"), fireAt: try utc("2026-10-24T07:30:00Z")))
        )
        let after = try entry(learning, last: "2026-10-24", evidence: evidence, previous: "09:30")
        let next = planner.decide(after, tenant: learning, now: try utc("2026-10-24T12:00:00Z"))
        #expect(next == .plan(next: PlannedFire(date: try day("2026-10-25"), fireAt: try utc("2026-10-25T08:30:00Z"))))
        // Planning again (another node, a restart) plans the same.
        #expect(planner.decide(after, tenant: learning, now: try utc("2026-10-24T12:00:00Z")) == next)
        // A tenant that does not learn keeps the stated 08:00 (07:00Z in CET).
        let fixed = try tenant(learning: false)
        let stated = planner.decide(
            try entry(fixed, last: "2026-10-24", evidence: evidence, previous: "09:30"),
            tenant: fixed,
            now: try utc("2026-10-24T12:00:00Z")
        )
        #expect(
            stated == .plan(next: PlannedFire(date: try day("2026-10-25"), fireAt: try utc("2026-10-25T07:00:00Z")))
        )
    }

    @Test("The step limit holds the move to an hour a day; a time the user set is kept unless they opt in")
    func stepAndOwnTime() throws {
        let learning = try tenant(learning: true)
        let evidence = try readsLate(pushed: "08:00", read: "10:35")
        // Last delivered at 08:00: the next is an hour later, not at 10:30 at once.
        let first = planner.decide(
            try entry(learning, last: "2026-11-23", evidence: evidence, previous: "08:00"),
            tenant: learning,
            now: try utc("2026-11-23T12:00:00Z")
        )
        #expect(first == .plan(next: PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T08:00:00Z"))))
        // The user set 08:00 themselves: kept, until they opt in.
        let own = try entry(learning, last: "2026-11-23", time: "08:00", evidence: evidence, previous: "08:00")
        let kept = planner.decide(own, tenant: learning, now: try utc("2026-11-23T12:00:00Z"))
        #expect(kept == .plan(next: PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T07:00:00Z"))))
        var optedIn = own
        optedIn.timing?.optedIn = true
        #expect(planner.decide(optedIn, tenant: learning, now: try utc("2026-11-23T12:00:00Z")) == first)
    }

    @Test("Quiet hours and the programme's weekdays win over what is learned")
    func guardrailsWin() throws {
        // Stated 19:00, the user reads at 21:15, inside the quiet hours from 21:00 (a push at 20:30 would have been
        // read within its hour); the programme runs Monday to Friday.
        let learning = try tenant(
            learning: true,
            weekdays: [1, 2, 3, 4, 5],
            quiet: "21:00-07:00",
            deliveryTime: "19:00"
        )
        let evidence = try readsLate(pushed: "19:00", read: "21:15")
        var times: [Date] = []
        var last = try day("2026-11-27")  // a Friday
        var previous = "20:00"
        for _ in 0..<10 {
            let action = planner.decide(
                try entry(learning, last: last.description, time: nil, evidence: evidence, previous: previous),
                tenant: learning,
                now: Date(timeIntervalSince1970: Double(last.dayNumber * 86_400 + 43_200))
            )
            guard case .plan(let next?) = action else {
                Issue.record("\(action)")
                return
            }
            #expect((1...5).contains(next.date.isoWeekday), "\(next.date)")
            let wall = Int(next.fireAt.timeIntervalSince1970 + 3600) % 86_400 / 60  // CET in winter
            #expect(wall < 21 * 60 && wall >= 7 * 60, "\(next)")
            times.append(next.fireAt)
            last = next.date
            previous = try LocalTime(minuteOfDay: wall).description
        }
        // Moved as late as the quiet hours allow: 20:30, the last half hour before them.
        #expect(times.suffix(5).allSatisfy { Int($0.timeIntervalSince1970 + 3600) % 86_400 == 20 * 3600 + 1800 })
    }

    @Test(
        "A day's report says 'deferred by quiet hours' from the day's own time: the stated one inside them, not a learned one outside"
    )
    func deferredByTheDaysTime() throws {
        // Stated 08:00 inside the quiet hours 06:00-08:30; the user reads at 09:45.
        let learning = try tenant(learning: true, quiet: "06:00-08:30")
        let fixed = try tenant(learning: false, quiet: "06:00-08:30")
        let evidence = try readsLate(pushed: "08:30", read: "09:45")
        let now = try utc("2026-11-24T12:00:00Z")
        for (tenant, deferred) in [(fixed, true), (learning, false)] {
            var due = try entry(tenant, last: "2026-11-23", evidence: evidence, previous: "09:00")
            due.localDate = try day("2026-11-24")
            due.fireAt = try utc("2026-11-24T08:00:00Z")
            let action = planner.decide(due, tenant: tenant, now: now)
            guard case .deliver = action else {
                Issue.record("\(action)")
                continue
            }
            #expect(
                planner.tally(action, due, tenant: tenant)?.deferredByQuietHours == deferred,
                "\(tenant.learnedTiming)"
            )
        }
    }
}
