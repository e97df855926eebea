import Foundation
import Testing

@testable import Engine

/// Pure tests of when a user's impulse fires: zones, daylight saving both ways, the date line, quiet hours,
/// weekdays, spreading, preference changes, catch-up and staleness.
@Suite("Daily schedule")
struct DailyScheduleTests {
    func utc(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    func day(_ text: String) throws -> LocalDate { try LocalDate(parsing: text) }

    func schedule(
        _ zone: String,
        _ time: String,
        quiet: (String, String)? = nil,
        weekdays: [Int] = [1, 2, 3, 4, 5, 6, 7],
        spread: Int = 0
    ) throws -> DailySchedule {
        DailySchedule(
            timeZone: try #require(TimeZone(identifier: zone)),
            deliveryTime: try LocalTime(parsing: time),
            quietHours: try quiet.map {
                QuietHours(start: try LocalTime(parsing: $0.0), end: try LocalTime(parsing: $0.1))
            },
            weekdays: try Weekdays(weekdays),
            spreadSeconds: spread
        )
    }

    @Test("Local dates: parsing, printing, weekdays and arithmetic agree with the calendar")
    func localDates() throws {
        #expect(try day("2026-11-22").description == "2026-11-22")
        #expect(try day("2026-11-22").isoWeekday == 7)  // a Sunday
        #expect(try day("2026-11-23").isoWeekday == 1)
        #expect(try day("2024-02-28").adding(days: 1).description == "2024-02-29")
        #expect(try day("1969-12-31").adding(days: 1).description == "1970-01-01")
        #expect(throws: EngineError.self) { try LocalDate(parsing: "2026-02-30") }
        #expect(throws: EngineError.self) { try LocalDate(parsing: "26-1-1") }
        // The byte-wise reading agrees with the general one: every day of four years, and text that is not a date.
        func general(_ text: String) -> LocalDate? {
            let parts = text.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
                let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
            else { return nil }
            return try? LocalDate(year: year, month: month, day: day)
        }
        var texts = (0..<1461).map { LocalDate(dayNumber: 19_723 + $0).description }
        texts += [
            "2026-13-01", "2026-00-10", "2026-01-32", "0000-01-01", "9999-12-31", "2026/01/01", "2026-1-011",
            "+202-01-01", "2026-01-0a", "2026-01-01 ", "", "2026-01-1", "２０２６-01-01", "2026-02-29", "2028-02-29",
        ]
        for text in texts {
            #expect((try? LocalDate(parsing: text)) == general(text), "\(text)")
        }
        #expect(try day("2028-02-29").description == "2028-02-29")
        // The byte-wise printing agrees with padded components from year 0 to 9999, and reads back.
        let first = try LocalDate(year: 1, month: 1, day: 1).dayNumber - 366
        let last = try LocalDate(year: 9999, month: 12, day: 31).dayNumber
        for number in Array(stride(from: first, through: last, by: 89)) + [first, last] {
            let date = LocalDate(dayNumber: number)
            let (y, m, d) = date.components
            let padded = [(y, 4), (m, 2), (d, 2)].map {
                String(repeating: "0", count: $1 - String($0).count) + String($0)
            }
            #expect(date.description == padded.joined(separator: "-"))
            if y > 0 { #expect(try LocalDate(parsing: date.description) == date) }
        }
    }

    @Test("A wall time resolves in the user's zone, winter and summer")
    func zones() throws {
        let berlin = try schedule("Europe/Berlin", "08:00")
        #expect(berlin.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-23T07:00:00Z")))
        #expect(berlin.fireInstant(for: try day("2026-07-01")) == (try utc("2026-07-01T06:00:00Z")))
        let tokyo = try schedule("Asia/Tokyo", "08:00")
        #expect(tokyo.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-22T23:00:00Z")))
    }

    @Test("Spring forward: a time in the gap fires at the next valid instant")
    func springForward() throws {
        let berlin = try schedule("Europe/Berlin", "02:30")
        // 02:00 CET became 03:00 CEST at 01:00Z on 2026-03-29.
        #expect(berlin.fireInstant(for: try day("2026-03-29")) == (try utc("2026-03-29T01:00:00Z")))
        #expect(berlin.fireInstant(for: try day("2026-03-30")) == (try utc("2026-03-30T00:30:00Z")))
        let newYork = try schedule("America/New_York", "02:15")
        #expect(newYork.fireInstant(for: try day("2026-03-08")) == (try utc("2026-03-08T07:00:00Z")))
    }

    @Test("Fall back: a repeated time fires once, at its first occurrence")
    func fallBack() throws {
        let berlin = try schedule("Europe/Berlin", "02:30")
        // 02:30 happened at 00:30Z (CEST) and again at 01:30Z (CET) on 2026-10-25.
        #expect(berlin.fireInstant(for: try day("2026-10-25")) == (try utc("2026-10-25T00:30:00Z")))
        let planner = DispatchPlanner(staleness: .seconds(3600), spreadWindow: .zero)
        let tenant = try Tenant(id: TenantID("acme"), name: "Acme", defaultTimeZone: "Europe/Berlin")
        var entry = ScheduleEntry(
            tenant: tenant.id,
            user: UserID(1),
            fireAt: try utc("2026-10-25T00:30:00Z"),
            localDate: try day("2026-10-25"),
            lastDate: try day("2026-10-24"),
            preferences: DeliveryPreferences(timeZone: "Europe/Berlin", deliveryTime: try LocalTime(parsing: "02:30"))
        )
        let first = planner.decide(entry, tenant: tenant, now: try utc("2026-10-25T00:30:00Z"))
        let next = PlannedFire(date: try day("2026-10-26"), fireAt: try utc("2026-10-26T01:30:00Z"))
        #expect(first == .deliver(try day("2026-10-25"), next: next))
        // At the second 02:30 the row is already on the next day: nothing is due again.
        entry.lastDate = try day("2026-10-25")
        entry.localDate = next.date
        entry.fireAt = next.fireAt
        #expect(planner.decide(entry, tenant: tenant, now: try utc("2026-10-25T01:30:00Z")) == .plan(next: next))
    }

    @Test("The date line: each side delivers on its own local date; a date a zone skipped has no delivery")
    func dateLine() throws {
        let kiritimati = try schedule("Pacific/Kiritimati", "08:00")  // UTC+14
        let pagoPago = try schedule("Pacific/Pago_Pago", "08:00")  // UTC-11
        let instant = try utc("2026-11-22T20:00:00Z")
        #expect(kiritimati.localDate(at: instant).description == "2026-11-23")
        #expect(pagoPago.localDate(at: instant).description == "2026-11-22")
        #expect(kiritimati.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-22T18:00:00Z")))
        #expect(pagoPago.fireInstant(for: try day("2026-11-22")) == (try utc("2026-11-22T19:00:00Z")))
        // Samoa moved across the date line: 2011-12-30 did not happen in Apia.
        let apia = try schedule("Pacific/Apia", "08:00")
        #expect(apia.fireInstant(for: try day("2011-12-30")) == nil)
        let next = try #require(apia.next(after: try day("2011-12-29"), notBefore: try utc("2011-12-29T00:00:00Z")))
        #expect(next.date.description == "2011-12-31")
        #expect(next.fireAt == (try utc("2011-12-30T18:00:00Z")))
    }

    @Test("Quiet hours move the time to their end; a window across midnight moves it to the next morning")
    func quietHours() throws {
        let early = try schedule("UTC", "06:00", quiet: ("22:00", "07:00"))
        #expect(early.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-23T07:00:00Z")))
        let late = try schedule("UTC", "23:00", quiet: ("22:00", "07:00"))
        #expect(late.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-24T07:00:00Z")))
        let outside = try schedule("UTC", "08:00", quiet: ("22:00", "07:00"))
        #expect(outside.fireInstant(for: try day("2026-11-23")) == (try utc("2026-11-23T08:00:00Z")))
        // Each late day keeps its own date, one push per morning.
        let first = try #require(late.next(after: try day("2026-11-23"), notBefore: try utc("2026-11-23T12:00:00Z")))
        #expect(first.date.description == "2026-11-24")
        #expect(first.fireAt == (try utc("2026-11-25T07:00:00Z")))
    }

    @Test("Only chosen weekdays deliver")
    func weekdays() throws {
        let mondays = try schedule("UTC", "08:00", weekdays: [1])
        #expect(mondays.fireInstant(for: try day("2026-11-22")) == nil)  // Sunday
        let next = try #require(mondays.next(after: try day("2026-11-23"), notBefore: try utc("2026-11-23T09:00:00Z")))
        #expect(next.date.description == "2026-11-30")
    }

    @Test("The tenant's quiet hours apply to users without their own; its days bound the users' weekdays")
    func tenantDefaults() throws {
        let tenant = try Tenant(
            id: TenantID("acme"),
            name: "Acme",
            defaultTimeZone: "UTC",
            defaultDeliveryTime: try LocalTime(parsing: "06:00"),
            defaultQuietHours: try QuietHours(parsing: "22:00-07:00"),
            weekdays: try Weekdays([1, 2, 3, 4, 5])
        )
        func fire(_ preferences: DeliveryPreferences, on date: String) throws -> Date? {
            DailySchedule(user: UserID(1), tenant: tenant, preferences: preferences, spreadWindow: .zero)
                .fireInstant(for: try day(date))
        }
        // 2026-11-23 is a Monday, 2026-11-28 a Saturday.
        #expect(try fire(DeliveryPreferences(), on: "2026-11-23") == (try utc("2026-11-23T07:00:00Z")))
        #expect(try fire(DeliveryPreferences(), on: "2026-11-28") == nil)
        let ownQuiet = DeliveryPreferences(quietHours: try QuietHours(parsing: "05:00-06:30"))
        #expect(try fire(ownQuiet, on: "2026-11-23") == (try utc("2026-11-23T06:30:00Z")))
        // A user's weekend days meet none of the programme's: the programme's days hold.
        let weekend = DeliveryPreferences(weekdays: try Weekdays([6, 7]))
        #expect(try fire(weekend, on: "2026-11-28") == nil)
        #expect(try fire(weekend, on: "2026-11-23") != nil)
        let mondays = DeliveryPreferences(weekdays: try Weekdays([1, 6]))
        #expect(try fire(mondays, on: "2026-11-23") != nil)
        #expect(try fire(mondays, on: "2026-11-24") == nil)
        #expect(try fire(mondays, on: "2026-11-28") == nil)
        // Equal start and end is no window at all.
        let none = try Tenant(id: TenantID("x"), name: "X", defaultQuietHours: try QuietHours(parsing: "07:00-07:00"))
        #expect(none.defaultQuietHours == nil)
        #expect(throws: EngineError.self) { try QuietHours(parsing: "22:00") }
    }

    @Test("Users due in the same minute are spread over the window, each at a fixed offset")
    func spreading() throws {
        let tenant = try Tenant(id: TenantID("acme"), name: "Acme", defaultTimeZone: "UTC")
        let preferences = DeliveryPreferences(deliveryTime: try LocalTime(parsing: "08:00"))
        let offsets = (1...1000).map {
            DailySchedule(user: UserID($0), tenant: tenant, preferences: preferences, spreadWindow: .seconds(300))
                .spreadSeconds
        }
        #expect(offsets.allSatisfy { (0..<300).contains($0) })
        #expect(Set(offsets).count > 250)
        let again = DailySchedule(
            user: UserID(7),
            tenant: tenant,
            preferences: preferences,
            spreadWindow: .seconds(300)
        )
        #expect(again.spreadSeconds == offsets[6])
        let fire = again.fireInstant(for: try day("2026-11-23"))
        #expect(fire == (try utc("2026-11-23T08:00:00Z")).addingTimeInterval(Double(offsets[6])))
        // Per 10-second bucket of the window, no bucket holds more than a few percent of the users.
        let buckets = Dictionary(grouping: offsets, by: { $0 / 10 }).mapValues(\.count)
        #expect(buckets.count == 30)
        #expect(buckets.values.max() ?? 0 < 70)
    }
}

/// The due-row decisions: first planning, preference changes, catch-up, staleness, disabled users.
@Suite("Dispatch planner")
struct DispatchPlannerTests {
    let tenant: Tenant
    let planner = DispatchPlanner(staleness: .seconds(6 * 3600), spreadWindow: .zero)

    init() throws {
        tenant = try Tenant(id: TenantID("acme"), name: "Acme", defaultTimeZone: "UTC")
    }

    func utc(_ text: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: text)) }
    func day(_ text: String) throws -> LocalDate { try LocalDate(parsing: text) }

    func entry(
        fireAt: String,
        date: String?,
        last: String?,
        zone: String? = nil,
        time: String = "08:00",
        enabled: Bool = true
    ) throws -> ScheduleEntry {
        ScheduleEntry(
            tenant: tenant.id,
            user: UserID(1),
            fireAt: try utc(fireAt),
            localDate: try date.map { try day($0) },
            lastDate: try last.map { try day($0) },
            enabled: enabled,
            preferences: DeliveryPreferences(timeZone: zone, deliveryTime: try LocalTime(parsing: time))
        )
    }

    @Test("A new user is planned for the next delivery time; a due row delivers and moves to the next day")
    func planAndDeliver() throws {
        let new = try entry(fireAt: "1970-01-01T00:00:00Z", date: nil, last: nil)
        let now = try utc("2026-11-23T07:00:00Z")
        let planned = PlannedFire(date: try day("2026-11-23"), fireAt: try utc("2026-11-23T08:00:00Z"))
        #expect(planner.decide(new, tenant: tenant, now: now) == .plan(next: planned))
        let due = try entry(fireAt: "2026-11-23T08:00:00Z", date: "2026-11-23", last: nil)
        let tomorrow = PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T08:00:00Z"))
        #expect(
            planner.decide(due, tenant: tenant, now: try utc("2026-11-23T08:00:01Z"))
                == .deliver(try day("2026-11-23"), next: tomorrow)
        )
    }

    @Test("A changed preferred time replans today if it is still undelivered, never a delivered day")
    func preferenceChange() throws {
        // At 07:30 the user moves 08:00 to 07:00: today's 07:00 is within the staleness limit and undelivered.
        let undelivered = try entry(fireAt: "1970-01-01T00:00:00Z", date: nil, last: "2026-11-22", time: "07:00")
        let now = try utc("2026-11-23T07:30:00Z")
        let today = PlannedFire(date: try day("2026-11-23"), fireAt: try utc("2026-11-23T07:00:00Z"))
        #expect(planner.decide(undelivered, tenant: tenant, now: now) == .plan(next: today))
        // Today was delivered: the next plan is tomorrow, whatever the new time.
        let delivered = try entry(fireAt: "1970-01-01T00:00:00Z", date: nil, last: "2026-11-23", time: "20:00")
        let tomorrow = PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T20:00:00Z"))
        #expect(planner.decide(delivered, tenant: tenant, now: now) == .plan(next: tomorrow))
    }

    @Test("Moving west across the date line never delivers a day twice")
    func timeZoneChange() throws {
        // Delivered 2026-11-23 in Tokyo; now in Los Angeles, where it is still 2026-11-22.
        let moved = try entry(
            fireAt: "1970-01-01T00:00:00Z",
            date: nil,
            last: "2026-11-23",
            zone: "America/Los_Angeles"
        )
        let now = try utc("2026-11-23T00:30:00Z")
        guard case .plan(let next?) = planner.decide(moved, tenant: tenant, now: now) else {
            Issue.record("expected a plan")
            return
        }
        #expect(next.date.description == "2026-11-24")
        #expect(next.fireAt == (try utc("2026-11-24T16:00:00Z")))
    }

    @Test("Catch-up: a day missed by less than the staleness limit is delivered once; an older one is skipped")
    func catchUpAndStaleness() throws {
        let due = try entry(fireAt: "2026-11-23T08:00:00Z", date: "2026-11-23", last: "2026-11-22")
        let tomorrow = PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T08:00:00Z"))
        // Back at 13:00: five hours late, within six.
        #expect(
            planner.decide(due, tenant: tenant, now: try utc("2026-11-23T13:00:00Z"))
                == .deliver(try day("2026-11-23"), next: tomorrow)
        )
        // Back at 15:00: seven hours late.
        #expect(
            planner.decide(due, tenant: tenant, now: try utc("2026-11-23T15:00:00Z"))
                == .skipStale(try day("2026-11-23"), next: tomorrow)
        )
        // Down for three days, back at 10:00 on the 26th: the 23rd is skipped, and the next plan is the one
        // missed day within the limit (the 26th at 08:00), delivered once; the days between are never queued.
        let skipped = planner.decide(due, tenant: tenant, now: try utc("2026-11-26T10:00:00Z"))
        let catchUp = PlannedFire(date: try day("2026-11-26"), fireAt: try utc("2026-11-26T08:00:00Z"))
        #expect(skipped == .skipStale(try day("2026-11-23"), next: catchUp))
        let caughtUp = try entry(fireAt: "2026-11-26T08:00:00Z", date: "2026-11-26", last: "2026-11-22")
        let after = PlannedFire(date: try day("2026-11-27"), fireAt: try utc("2026-11-27T08:00:00Z"))
        #expect(
            planner.decide(caughtUp, tenant: tenant, now: try utc("2026-11-26T10:00:00Z"))
                == .deliver(try day("2026-11-26"), next: after)
        )
    }

    @Test("A row for a day already delivered is replanned, and a disabled user is parked")
    func alreadyDeliveredAndDisabled() throws {
        let stale = try entry(fireAt: "2026-11-23T08:00:00Z", date: "2026-11-23", last: "2026-11-23")
        let tomorrow = PlannedFire(date: try day("2026-11-24"), fireAt: try utc("2026-11-24T08:00:00Z"))
        #expect(planner.decide(stale, tenant: tenant, now: try utc("2026-11-23T08:00:00Z")) == .plan(next: tomorrow))
        let disabled = try entry(fireAt: "2026-11-23T08:00:00Z", date: "2026-11-23", last: nil, enabled: false)
        #expect(planner.decide(disabled, tenant: tenant, now: try utc("2026-11-23T08:00:00Z")) == .park)
    }
}
