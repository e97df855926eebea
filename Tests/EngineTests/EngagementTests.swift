import Foundation
import TestSupport
import Testing

@testable import Engine

/// The engagement reports: pure rules, and the daily rows both stores keep with the ledger's writes.
@Suite("Engagement reports", .timeLimit(.minutes(2)))
struct EngagementTests {
    static let day = "2026-11-20"

    // MARK: Pure rules

    @Test("The median time to read is interpolated inside the bucket that holds it")
    func median() {
        var buckets = [Int](repeating: 0, count: ReadLatency.bounds.count + 1)
        #expect(ReadLatency.median(buckets) == nil)
        buckets[ReadLatency.bucket(seconds: 30)] += 1  // 0...60
        buckets[ReadLatency.bucket(seconds: 200)] += 3  // 60...300
        // Two of four reads lie below the median: it is a third of the way into 60...300.
        let expected: Double = 60 + 240.0 / 3
        #expect(ReadLatency.median(buckets) == expected)
        #expect(ReadLatency.bucket(seconds: 60) == 0)
        #expect(ReadLatency.bucket(seconds: 10_000_000) == ReadLatency.bounds.count)
        var slow = [Int](repeating: 0, count: ReadLatency.bounds.count + 1)
        slow[ReadLatency.bounds.count] = 5
        #expect(ReadLatency.median(slow) == ReadLatency.bounds.last)
    }

    @Test("A report's range defaults to the last 30 days, and a reversed, malformed or year-long one is refused")
    func range() throws {
        let today = try LocalDate(parsing: "2026-11-25")
        let fallback = try ReportRange(from: nil, to: nil, today: today)
        #expect(fallback.from.description == "2026-10-27" && fallback.through == today && fallback.days.count == 30)
        #expect(try ReportRange(from: "2026-11-01", to: "2026-11-01", today: today).days.count == 1)
        for (from, to) in [("2026-11-02", "2026-11-01"), ("2026-13-01", nil), ("yesterday", nil), ("2025-01-01", nil)] {
            #expect(throws: EngineError.self) { try ReportRange(from: from, to: to, today: today) }
        }
    }

    @Test("CSV fields are quoted when they must be, and a formula is defused")
    func csvFields() {
        #expect(EngagementReport.field("plain") == "plain")
        #expect(EngagementReport.field("a,b") == "\"a,b\"")
        #expect(EngagementReport.field("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(EngagementReport.field("=HYPERLINK(\"x\")") == "\"'=HYPERLINK(\"\"x\"\")\"")
        #expect(EngagementReport.field("-1") == "'-1")
    }

    @Test("The planner's tally names the day, quiet hours that moved it, and the weekdays skipped before the next")
    func plannerTally() throws {
        let planner = DispatchPlanner(staleness: .seconds(3600), spreadWindow: .zero)
        var tenant = try Tenant(id: TenantID("acme"), name: "Acme", apnsTopic: "t")
        tenant.defaultTimeZone = "UTC"
        tenant.defaultDeliveryTime = try LocalTime(hour: 7, minute: 0)
        tenant.defaultQuietHours = QuietHours(
            start: try LocalTime(hour: 22, minute: 0),
            end: try LocalTime(hour: 8, minute: 0)
        )
        // Friday 2026-11-20: Monday to Friday only, so Saturday and Sunday are skipped before Monday.
        let friday = try LocalDate(parsing: "2026-11-20")
        var preferences = DeliveryPreferences()
        preferences.weekdays = try Weekdays([1, 2, 3, 4, 5])
        let entry = ScheduleEntry(
            tenant: tenant.id,
            user: UserID(1),
            fireAt: Date(timeIntervalSince1970: Double(friday.dayNumber * 86_400 + 8 * 3600)),
            localDate: friday,
            lastDate: friday.adding(days: -1),
            preferences: preferences
        )
        let now = entry.fireAt.addingTimeInterval(10)
        let action = planner.decide(entry, tenant: tenant, now: now)
        guard case .deliver(let date, let next) = action else {
            Issue.record("expected a delivery, got \(action)")
            return
        }
        #expect(date == friday && next?.date == friday.adding(days: 3))
        let tally = try #require(planner.tally(action, entry, tenant: tenant))
        #expect(tally.date == friday && tally.due && !tally.stale && tally.deferredByQuietHours)
        #expect(tally.skippedWeekdays.map(\.description) == ["2026-11-21", "2026-11-22"])
        #expect(planner.tally(.park, entry, tenant: tenant) == nil)
    }

    @Test("The report adds a range's rows up per day (every day), per impulse and per life area")
    func reportShape() throws {
        let acme = try TenantID("acme")
        var records = EngagementRecords()
        var one = EngagementCounts()
        (one.assigned, one.pushed, one.read) = (4, 3, 2)
        var two = EngagementCounts()
        (two.assigned, two.noDevice) = (2, 2)
        records.engagement[EngagementKey(tenant: acme, day: "2026-11-20", impulse: try ImpulseID("one"))] = one
        records.engagement[EngagementKey(tenant: acme, day: "2026-11-21", impulse: try ImpulseID("one"))] = one
        records.engagement[EngagementKey(tenant: acme, day: "2026-11-21", impulse: try ImpulseID("gone"))] = two
        var dispatch = DispatchCounts()
        (dispatch.due, dispatch.skippedWeekday) = (6, 1)
        records.dispatch["2026-11-21"] = dispatch
        let range = try ReportRange(from: "2026-11-19", to: "2026-11-21", today: LocalDate(parsing: "2026-11-25"))
        let catalog = [try Self.impulse(acme, "one", .sleep)]
        let report = EngagementReport(tenant: acme, range: range, records: records, catalog: catalog)
        #expect(report.days.map(\.counts.assigned) == [0, 4, 6])
        #expect(report.days[2].dispatch.active == 7)
        #expect(report.impulses.map(\.impulse.rawValue) == ["one", "gone"])
        #expect(report.impulses[0].counts.assigned == 8 && report.impulses[0].title == "one")
        #expect(report.lifeAreas.map(\.lifeArea) == [.sleep, nil])
        #expect(report.total.assigned == 10 && report.total.readRate == 0.4)
        let csv = report.csv(.days)
        #expect(csv.hasPrefix("day,active,due,skipped_weekday,skipped_stale,deferred_quiet_hours,assigned,"))
        #expect(csv.components(separatedBy: "\r\n").count == 5)  // header, 3 days, the last CRLF
        #expect(csv.contains("\r\n2026-11-21,7,6,1,0,0,6,3,2,0,0,2,0.3333,"))
    }

    // MARK: Both stores

    @Test(
        "Each ledger write adds to the day's row once: assigned, pushed, no device, failed, fetched, read",
        arguments: StoreKind.allCases
    )
    func ledgerWrites(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let assignedAt = Date(timeIntervalSince1970: 1_763_625_600)  // 2026-11-20 08:00 UTC
        let recorded = try await f.store.recordDeliveries(
            [f.a, f.b, f.a, f.b].enumerated().map { index, user in
                NewDelivery(
                    tenant: f.acme,
                    user: user.id,
                    impulse: try! ImpulseID(index == 1 ? "two" : "one"),
                    kind: .manual,
                    assignedAt: assignedAt,
                    awaitsPush: true,
                    reportDay: Self.day
                )
            }
        )
        #expect(recorded.count == 4 && recorded.allSatisfy { $0.reportDay == Self.day })
        let pushedAt = assignedAt.addingTimeInterval(5)
        let marks = [
            DeliveryMark(
                tenant: f.acme,
                delivery: recorded[0].id,
                kind: .pushed(apnsID: "A", channels: .fcm),
                at: pushedAt
            ),
            // An iPhone and an Android phone took it: it counts on both channels, and so does its read.
            DeliveryMark(
                tenant: f.acme,
                delivery: recorded[3].id,
                kind: .pushed(apnsID: "B", channels: [.apns, .fcm]),
                at: pushedAt
            ),
            DeliveryMark(tenant: f.acme, delivery: recorded[3].id, kind: .read, at: pushedAt.addingTimeInterval(120)),
            DeliveryMark(tenant: f.acme, delivery: recorded[1].id, kind: .noDevice, at: pushedAt),
            DeliveryMark(tenant: f.acme, delivery: recorded[2].id, kind: .settled, at: pushedAt),
            DeliveryMark(tenant: f.acme, delivery: recorded[0].id, kind: .fetched, at: pushedAt.addingTimeInterval(30)),
            DeliveryMark(tenant: f.acme, delivery: recorded[0].id, kind: .read, at: pushedAt.addingTimeInterval(90)),
            // A read without a fetch before it counts as both; without a push it has no time to read.
            DeliveryMark(tenant: f.acme, delivery: recorded[1].id, kind: .read, at: pushedAt.addingTimeInterval(10)),
            // Another tenant's id changes nothing.
            DeliveryMark(tenant: f.globex, delivery: recorded[2].id, kind: .read, at: pushedAt),
        ]
        try await f.store.applyMarks(marks)
        // The same marks again (a retried batch, a second node): the rows do not move.
        try await f.store.applyMarks(marks)
        let range = try ReportRange(from: Self.day, to: Self.day, today: LocalDate(parsing: Self.day))
        let records = try await f.store.engagement(tenant: f.acme, from: range.from, through: range.through)
        let one = try #require(
            records.engagement[EngagementKey(tenant: f.acme, day: Self.day, impulse: try ImpulseID("one"))]
        )
        let two = try #require(
            records.engagement[EngagementKey(tenant: f.acme, day: Self.day, impulse: try ImpulseID("two"))]
        )
        #expect((one.assigned, one.pushed, one.noDevice, one.failed, one.fetched, one.read) == (3, 2, 0, 1, 2, 2))
        #expect(one.readLatency[ReadLatency.bucket(seconds: 90)] == 2 && one.readLatency.reduce(0, +) == 2)
        #expect(one.channels == [.apns: ChannelCounts(pushed: 1, read: 1), .fcm: ChannelCounts(pushed: 2, read: 2)])
        #expect((two.assigned, two.pushed, two.noDevice, two.failed, two.fetched, two.read) == (1, 0, 1, 0, 1, 1))
        #expect(two.readLatency.reduce(0, +) == 0 && two.channels.isEmpty)
        // The ledger keeps each delivery's channels; one pushed by a release before FCM (none kept) was APNs'.
        let kept = try await f.store.deliveredImpulses(tenant: f.acme, user: f.b.id, after: nil, before: nil, limit: 10)
        #expect(kept.first { $0.delivery.id == recorded[3].id }?.delivery.channels == [.apns, .fcm])
        #expect(kept.first { $0.delivery.id == recorded[1].id }?.delivery.channels == [])
        #expect(PushChannels(stored: nil, pushed: true) == .apns && PushChannels(stored: nil, pushed: false) == [])
        let report = EngagementReport(tenant: f.acme, range: range, records: records, catalog: [])
        #expect(
            report.channels.map(\.counts) == [ChannelCounts(pushed: 1, read: 1), ChannelCounts(pushed: 2, read: 2)]
        )
        #expect(report.csv(.channels).contains("2026-11-20,fcm,2,2,1.0000\r\n"))
        #expect(
            try await f.store.engagement(tenant: f.globex, from: range.from, through: range.through).engagement.isEmpty
        )
        // Outside the range: nothing.
        let later = try LocalDate(parsing: "2026-11-21")
        #expect(try await f.store.engagement(tenant: f.acme, from: later, through: later).engagement.isEmpty)
        // Deleting the tenant deletes its rows.
        _ = try await f.store.deleteTenant(
            f.acme,
            audit: AuditEntry(.commandLine, "tenant.delete", tenant: f.acme, target: "tenant:acme")
        )
        #expect(
            try await f.store.engagement(tenant: f.acme, from: range.from, through: range.through)
                == EngagementRecords()
        )
    }

    @Test("The scheduler's decisions count on their day when they take effect, once", arguments: StoreKind.allCases)
    func scheduleTally(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let due = try await f.store.dueSchedules(notAfter: Date(), limit: 10).filter { $0.tenant == f.acme }
        let (a, b) = (try #require(due.first { $0.user == f.a.id }), try #require(due.first { $0.user == f.b.id }))
        let friday = try LocalDate(parsing: Self.day)
        let next = PlannedFire(date: friday.adding(days: 3), fireAt: Date(timeIntervalSince1970: 1_763_971_200))
        let delivered = DayTally(
            date: friday,
            deferredByQuietHours: true,
            skippedWeekdays: [friday.adding(days: 1), friday.adding(days: 2)]
        )
        let stale = DayTally(date: friday, stale: true)
        func updates(_ a: ScheduleEntry, _ b: ScheduleEntry) -> [ScheduleUpdate] {
            [
                ScheduleUpdate(
                    tenant: f.acme,
                    user: a.user,
                    expectedFireAt: a.fireAt,
                    delivery: NewDelivery(
                        tenant: f.acme,
                        user: a.user,
                        impulse: try! ImpulseID("one"),
                        kind: .scheduled,
                        localDate: Self.day,
                        assignedAt: Date()
                    ),
                    next: next,
                    tally: delivered
                ),
                ScheduleUpdate(
                    tenant: f.acme,
                    user: b.user,
                    expectedFireAt: b.fireAt,
                    delivery: nil,
                    next: next,
                    tally: stale
                ),
            ]
        }
        #expect(try await f.store.commitSchedules(updates(a, b)).count == 1)
        // The same decisions again (a retried batch): the day exists and the row moved, so nothing counts twice.
        #expect(try await f.store.commitSchedules(updates(a, b)).isEmpty)
        let records = try await f.store.engagement(tenant: f.acme, from: friday, through: friday.adding(days: 3))
        var expected = DispatchCounts()
        (expected.due, expected.skippedStale, expected.deferredQuietHours) = (2, 1, 1)
        #expect(records.dispatch[Self.day] == expected)
        for skipped in ["2026-11-21", "2026-11-22"] { #expect(records.dispatch[skipped]?.skippedWeekday == 1) }
        #expect(records.dispatch["2026-11-23"] == nil)
        #expect(
            records.engagement[EngagementKey(tenant: f.acme, day: Self.day, impulse: try ImpulseID("one"))]?.assigned
                == 1
        )
    }

    static func impulse(_ tenant: TenantID, _ id: String, _ area: LifeArea) throws -> Impulse {
        try Impulse(
            tenant: tenant,
            id: ImpulseID(id),
            language: "EN",
            title: id,
            descriptionShort: "",
            description: "",
            durationMinutes: 1,
            action: .read,
            single: true,
            imageURLs: [],
            videoURL: nil,
            webURL: nil,
            lifeArea: area
        )
    }
}
