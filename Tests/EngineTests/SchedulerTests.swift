import Foundation
import GRDB
import InMemoryLogging
import Logging
import TestSupport
import Testing

@testable import Engine

/// The scheduler actor on a real SQLite store, with a scripted push transport below the gateway.
@Suite("Scheduler", .timeLimit(.minutes(3)))
struct SchedulerTests {
    func utc(_ text: String) throws -> Date { try #require(ISO8601DateFormatter().date(from: text)) }

    func setTime(_ f: StoreFixture, _ user: User, zone: String, time: String) async throws {
        try await f.store.setPreferences(
            tenant: user.tenant,
            user: user.id,
            language: nil,
            preferences: DeliveryPreferences(timeZone: zone, deliveryTime: try LocalTime(parsing: time))
        )
    }

    func stack(_ f: StoreFixture, transport: ScriptedTransport) -> (DeliveryLedger, PushGateway, Scheduler) {
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        let gateway = PushGateway(
            store: f.store,
            ledger: ledger,
            registry: TokenRegistry(store: f.store, logger: StoreFixture.logger),
            transport: transport,
            logger: StoreFixture.logger
        )
        let scheduler = Scheduler(
            store: f.store,
            ledger: ledger,
            gateway: gateway,
            configuration: .init(spreadWindow: .zero),
            logger: StoreFixture.logger
        )
        return (ledger, gateway, scheduler)
    }

    func scheduled(_ f: StoreFixture, _ user: User) async throws -> [Delivery] {
        try await f.store.deliveredImpulses(tenant: user.tenant, user: user.id, after: nil, before: nil, limit: 100)
            .map(\.delivery).filter { $0.kind == .scheduled }
    }

    @Test(
        "Each user gets one scheduled impulse per local day, recorded before its push; a restart pushes the rest",
        arguments: StoreKind.allCases
    )
    func exactlyOnceAcrossRestart(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await setTime(f, f.a, zone: "UTC", time: "08:00")
        try await setTime(f, f.b, zone: "Asia/Tokyo", time: "08:00")  // 2026-11-22T23:00Z
        for (n, user) in [f.a, f.b, f.globexA].enumerated() {
            _ = try await f.store.registerDevice(try f.device(user, token: String(format: "%064x", n + 1)))
        }
        let now = try utc("2026-11-23T07:30:00Z")
        // First run: its gateway never sends (the process dies before the pushes leave).
        let lost = ScriptedTransport()
        let (_, _, first) = stack(f, transport: lost)
        try await first.tick(now: now)  // plans the three new rows
        try await first.tick(now: now)  // b (Tokyo) and globexA (Berlin, 07:00Z) are due
        #expect(first.statistics.assigned == 2)
        let b = try #require(try await scheduled(f, f.b).first)
        #expect(b.localDate == "2026-11-23")
        #expect(b.pushedAt == nil)
        #expect(try await scheduled(f, f.a).isEmpty)

        // Second run on the same store: the unpushed deliveries are pushed, under their own delivery's collapse id.
        let transport = ScriptedTransport()
        let (_, gateway, second) = stack(f, transport: transport)
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        if kind == .postgres {
            // The first run's leases hold the deliveries until they end (here by hand, not by waiting): only then may
            // another run push them.
            #expect(try await second.requeueUnsettled(now: now).queued == 0)
            _ = try await f.texts("UPDATE unsettled_deliveries SET leased_until = 0 RETURNING 1")
        }
        #expect(try await second.requeueUnsettled(now: now).queued == 2)
        try await second.tick(now: now)
        #expect(second.statistics.assigned == 0)
        try await second.tick(now: try utc("2026-11-23T08:00:01Z"))
        try await second.tick(now: try utc("2026-11-23T08:00:02Z"))
        #expect(second.statistics.assigned == 1)
        #expect(try await eventually { transport.sent.withLock { $0.count } == 3 })
        let sentDeliveries = Set(transport.sent.withLock { $0.map(\.delivery) })
        #expect(sentDeliveries.contains(b.id))
        #expect(lost.sent.withLock { $0.isEmpty })
        #expect(
            try await eventually {
                try await (self.scheduled(f, f.a) + self.scheduled(f, f.b)).allSatisfy { $0.pushedAt != nil }
            }
        )
        for user in [f.a, f.b, f.globexA] {
            let rows = try await scheduled(f, user)
            #expect(rows.count == 1)
            #expect(rows.first?.localDate == "2026-11-23")
        }
        // The key, not the scheduler, makes it once: recording the day again records nothing.
        let again = try await f.store.commitSchedules([
            ScheduleUpdate(
                tenant: f.acme,
                user: f.b.id,
                expectedFireAt: .distantPast,
                delivery: NewDelivery(
                    tenant: f.acme,
                    user: f.b.id,
                    impulse: try ImpulseID("two"),
                    kind: .scheduled,
                    localDate: "2026-11-23",
                    assignedAt: now,
                    awaitsPush: true
                ),
                next: nil
            )
        ])
        #expect(again.isEmpty)
        // Nothing is left to push again.
        #expect(try await second.requeueUnsettled(now: now).queued == 0)
        // The day's report counts each of acme's days once, across the restart.
        let day = try LocalDate(parsing: "2026-11-23")
        let report = try await f.store.engagement(tenant: f.acme, from: day, through: day)
        #expect(report.dispatch["2026-11-23"]?.due == 2, "\(report.dispatch)")
        let counts = report.engagement.values.reduce(into: EngagementCounts()) { $0.add($1) }
        #expect(counts.assigned == 2 && counts.pushed == 2 && counts.failed == 0, "\(counts)")
    }

    @Test("A retired impulse is never chosen: the day's impulse comes from what is left", arguments: StoreKind.allCases)
    func retiredImpulses(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        try await setTime(f, f.a, zone: "UTC", time: "08:00")
        // "two" is the one this user would get on this day (the test fails without the retirement's effect).
        let audit = AuditEntry(.commandLine, "impulse.retire", tenant: f.acme, target: "impulse:two")
        try await f.store.setImpulseRetired(tenant: f.acme, impulse: ImpulseID("two"), retired: true, audit: audit)
        let (_, _, scheduler) = stack(f, transport: ScriptedTransport())
        try await scheduler.tick(now: try utc("2026-11-23T07:30:00Z"))
        try await scheduler.tick(now: try utc("2026-11-23T08:00:01Z"))
        let chosen = try await scheduled(f, f.a).map(\.impulse.rawValue)
        #expect(chosen == ["one"])
        #expect(try await f.store.impulse(tenant: f.acme, id: ImpulseID("two"))?.retired == true)
    }

    @Test("A store that refuses writes pauses the dispatch (backing off, logged once), and it recovers after")
    func failingStoreBacksOff() async throws {
        let f = try await StoreFixture.make()
        // The broker's own store with no busy wait: a write meets the lock below and fails at once, as on a full
        // disk (reads still work).
        let store = try await SQLiteStore(
            configuration: .init(path: f.location, busyTimeout: .zero),
            logger: StoreFixture.logger
        )
        let now = Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: Date())
        let minute = String(format: "%02d:%02d", now.hour ?? 0, now.minute ?? 0)
        for user in [f.a, f.b] { try await setTime(f, user, zone: "UTC", time: minute) }
        let handler = InMemoryLogHandler()
        var logger = Logger(label: "scheduler", factory: { _ in handler })
        logger.logLevel = .notice
        let ledger = DeliveryLedger(store: store, catalog: CatalogCache(store: store))
        // The scheduler's pauses are taken on a clock the test moves: no sleeping, and every pause is seen.
        let clock = ManualClock()
        let configuration = SchedulerConfiguration(spreadWindow: .zero)
        let scheduler = Scheduler(
            store: store,
            ledger: ledger,
            gateway: nil,
            configuration: configuration,
            logger: logger,
            clock: clock
        )
        let lock = try await SQLiteWriteLock.take(path: f.location)
        let running = Task { await scheduler.run() }
        defer { running.cancel() }
        // Each failed pass pauses; the test lets each pause end in turn. Without a pause the loop failed thousands
        // of times a second.
        let passes = 8
        for failures in 1...passes {
            #expect(
                try await eventually {
                    scheduler.currentHealth.consecutiveFailures == failures && clock.sleepers == 1
                },
                "\(failures): \(scheduler.currentHealth)"
            )
            if failures < passes { clock.advance(by: clock.untilNextWake ?? .zero) }
        }
        // One pause per failure, doubling from `failureBackoff`, jittered by half either way, capped.
        let pauses = clock.requested
        #expect(pauses.count == passes, "\(pauses)")
        for (index, pause) in pauses.enumerated() {
            let base = min(configuration.failureBackoff * (1 << index), configuration.maximumFailureBackoff)
            #expect(
                pause >= base * 0.5 && pause <= min(base * 1.5, configuration.maximumFailureBackoff),
                "\(index): \(pause)"
            )
        }
        let failing = scheduler.currentHealth
        #expect(failing.failingSince != nil)
        #expect(failing.lastError?.isEmpty == false)
        #expect(scheduler.statistics.assigned == 0)
        try await lock.release()
        // The pause ends; the next pass commits.
        clock.advance(by: clock.untilNextWake ?? .zero)
        #expect(
            try await eventually {
                scheduler.currentHealth.consecutiveFailures == 0 && scheduler.statistics.assigned >= 2
            },
            "\(scheduler.currentHealth) \(scheduler.statistics)"
        )
        let messages = handler.entries.map(\.message.description)
        #expect(messages.filter { $0.hasPrefix("dispatch failing") }.count == 1, "\(messages)")
        #expect(messages.filter { $0 == "dispatch recovered" }.count == 1, "\(messages)")
    }

    @Test(
        "A reminder pushes the impulse once more at its time; pending reminders are bounded",
        arguments: StoreKind.allCases
    )
    func reminders(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        _ = try await f.store.registerDevice(try f.device(f.a))
        let transport = ScriptedTransport()
        let (_, gateway, scheduler) = stack(f, transport: transport)
        let running = Task { await gateway.run() }
        defer { running.cancel() }
        let now = try utc("2026-11-23T10:00:00Z")
        let reminder = try await f.store.createReminder(
            tenant: f.acme,
            user: f.a.id,
            impulse: try ImpulseID("one"),
            at: now.addingTimeInterval(60),
            maximumPending: 2
        )
        _ = try await f.store.createReminder(
            tenant: f.acme,
            user: f.a.id,
            impulse: try ImpulseID("two"),
            at: now.addingTimeInterval(3600),
            maximumPending: 2
        )
        await #expect(throws: EngineError.self) {
            _ = try await f.store.createReminder(
                tenant: f.acme,
                user: f.a.id,
                impulse: try ImpulseID("two"),
                at: now,
                maximumPending: 2
            )
        }
        // Another tenant's user sees none of them.
        #expect(try await f.store.reminders(tenant: f.globex, user: f.globexA.id).isEmpty)
        try await scheduler.tick(now: now)
        #expect(scheduler.statistics.remindersFired == 0)
        try await scheduler.tick(now: reminder.fireAt)
        try await scheduler.tick(now: reminder.fireAt)
        #expect(scheduler.statistics.remindersFired == 1)
        // (The first ticks also planned and delivered the new users' daily impulse: 07:00Z in Berlin.)
        let items = try await f.store.deliveredImpulses(
            tenant: f.acme,
            user: f.a.id,
            after: nil,
            before: nil,
            limit: 10
        )
        let reminded = items.filter { $0.delivery.kind == .reminder }
        #expect(reminded.count == 1)
        #expect(reminded.first?.impulse.id == (try ImpulseID("one")))
        let pushed = try #require(reminded.first?.delivery.id)
        #expect(try await eventually { transport.sent.withLock { $0.contains { $0.delivery == pushed } } })
        #expect(try await f.store.reminders(tenant: f.acme, user: f.a.id).map(\.impulse) == [try ImpulseID("two")])
    }

    @Test(
        "A tenant's change is planned with its new settings though the scheduler's cache still holds the old ones",
        arguments: StoreKind.allCases
    )
    func tenantChangeWithStaleCache(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let (_, _, scheduler) = stack(f, transport: ScriptedTransport())
        let now = try utc("2026-11-23T05:00:00Z")
        try await f.store.setPreferences(
            tenant: f.acme,
            user: f.a.id,
            language: nil,
            preferences: DeliveryPreferences(timeZone: "UTC", deliveryTime: nil)
        )
        try await scheduler.tick(now: now)  // plans a at the tenant's default time; the cache holds the tenant
        let before = try #require(try await f.store.tenant(f.acme)).defaultDeliveryTime
        #expect(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id)?.fireAt.timeIntervalSince1970 ?? 0 > 0)
        // Changed as another node's admin API changes it: in the store, with the rows asking to be planned, and no
        // word to this scheduler's cache (the change feed has not reached it yet).
        let administration = Administration(store: f.store, hashPassword: { password, _ in password }, now: { now })
        let changed = before == (try LocalTime(parsing: "10:30")) ? "11:30" : "10:30"
        _ = try await administration.updateTenant(f.acme, TenantSettings(deliveryTime: changed), by: .commandLine)
        try await scheduler.tick(now: now)
        let row = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        #expect(row.fireAt == (try utc("2026-11-23T\(changed):00Z")), "planned with the settings from before")
    }

    @Test(
        "A preference change replans the row; a disabled user leaves the index until enabled again",
        arguments: StoreKind.allCases
    )
    func replanAndPark(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let (_, _, scheduler) = stack(f, transport: ScriptedTransport())
        let now = try utc("2026-11-23T05:00:00Z")
        try await setTime(f, f.a, zone: "UTC", time: "08:00")
        try await scheduler.tick(now: now)
        var row = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        #expect(row.localDate?.description == "2026-11-23")
        #expect(row.fireAt == (try utc("2026-11-23T08:00:00Z")))
        try await setTime(f, f.a, zone: "America/New_York", time: "09:30")
        row = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        #expect(row.localDate == nil)
        try await scheduler.tick(now: now)
        row = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        #expect(row.fireAt == (try utc("2026-11-23T14:30:00Z")))
        // Disabled: parked at its next due time, not delivered.
        #expect(try await f.store.setEnabled(tenant: f.acme, username: "a", enabled: false))
        let later = try utc("2026-11-23T15:00:00Z")
        try await scheduler.tick(now: later)
        #expect(scheduler.statistics.parked == 1)
        #expect(try await f.store.dueSchedules(notAfter: .distantFuture, limit: 100).allSatisfy { $0.user != f.a.id })
        #expect(try await scheduled(f, f.a).isEmpty)
        #expect(try await f.store.setEnabled(tenant: f.acme, username: "a", enabled: true))
        #expect(try await f.store.dueSchedules(notAfter: later, limit: 100).contains { $0.user == f.a.id })
    }
}

/// The scheduler's cost follows what is due: its queries are index searches, checked on SQLite's own plan.
@Suite("Due index")
struct DueIndexTests {
    @Test("Due rows and unsettled deliveries are read through their indexes, never by scanning users or deliveries")
    func queryPlans() async throws {
        let f = try await StoreFixture.make()
        func plan(_ sql: String) async throws -> String {
            try await f.sqlite.read { db in
                let placeholders = sql.filter { $0 == "?" }.count
                return try Row.fetchAll(
                    db,
                    sql: "EXPLAIN QUERY PLAN " + sql,
                    arguments: StatementArguments(Array(repeating: 0, count: placeholders))
                )
                .map { $0["detail"] as String }.joined(separator: "; ")
            }
        }
        for sql in SQLiteStore.engagementSQL {
            let report = try await plan(sql)
            #expect(
                report.contains("USING PRIMARY KEY") || report.contains("USING INDEX sqlite_autoindex"),
                "\(report)"
            )
        }
        let due = try await plan(SQLiteStore.dueSchedulesSQL)
        #expect(due.contains("USING INDEX schedules_due"), "\(due)")
        #expect(!due.contains("SCAN"), "\(due)")
        let unsettled = try await plan(SQLiteStore.unsettledSQL)
        #expect(unsettled.contains("deliveries_unsettled"), "\(unsettled)")
        let targets = try await plan(SQLiteStore.pushTargetsSQL("?,?,?"))
        #expect(targets.contains("USING INDEX devices_owner (user_id=?)"), "\(targets)")
        #expect(targets.contains("USING COVERING INDEX deliveries_unread (user_id=? AND tenant_id=?"), "\(targets)")
        #expect(!targets.contains("SCAN"), "\(targets)")
        // Only due rows come back, however many users there are: 300 users at 08:00 UTC, three at 08:00 Berlin.
        let many = try await f.store.createUsers(
            try (1...300).map {
                try NewUser(
                    tenant: f.acme,
                    username: "u\($0)",
                    passwordHash: "x",
                    preferences: DeliveryPreferences(timeZone: "UTC")
                )
            }
        )
        let scheduler = Scheduler(
            store: f.store,
            ledger: DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store)),
            gateway: nil,
            configuration: .init(batchSize: 1000, spreadWindow: .zero),
            logger: StoreFixture.logger
        )
        let early = try #require(ISO8601DateFormatter().date(from: "2026-11-23T05:00:00Z"))
        try await scheduler.tick(now: early)  // plans every new row
        #expect(scheduler.statistics.planned == 303)
        #expect(try await f.store.dueSchedules(notAfter: early, limit: 1000).isEmpty)
        let berlin = try await f.store.dueSchedules(notAfter: early.addingTimeInterval(2.5 * 3600), limit: 1000)
        #expect(Set(berlin.map(\.user)) == [f.a.id, f.b.id, f.globexA.id])
        let all = try await f.store.dueSchedules(notAfter: early.addingTimeInterval(3 * 3600), limit: 1000)
        #expect(all.count == 303)
        #expect(Set(all.map(\.user)).isSuperset(of: many.map(\.id)))
        // Read in pages after a cursor (the pipelined dispatch), the same rows come back once each, in order.
        let now = early.addingTimeInterval(3 * 3600)
        var cursor: ScheduleCursor?
        var paged: [ScheduleEntry] = []
        while true {
            let page = try await f.store.dueSchedules(notAfter: now, after: cursor, limit: 50)
            guard let last = page.last else { break }
            paged += page
            cursor = ScheduleCursor(fireAt: last.fireAt, user: last.user)
        }
        #expect(paged.map(\.user) == all.map(\.user))
        #expect(Set(paged.map(\.user)).count == 303)
        #expect(
            zip(paged, paged.dropFirst()).allSatisfy { ($0.fireAt, $0.user.rawValue) < ($1.fireAt, $1.user.rawValue) }
        )
    }
}

@Suite("Selection history")
struct SelectionHistoryStoreTests {
    @Test(
        "Histories are read for a batch of users at once: recent impulses and series progress, per tenant",
        arguments: StoreKind.allCases
    )
    func batch(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let steps = try (1...3).map { (n: Int) in
            try Impulse(
                tenant: f.acme,
                id: ImpulseID("s-\(n)"),
                language: "EN",
                title: "Step \(n)",
                descriptionShort: "",
                description: "",
                durationMinutes: 1,
                action: .do,
                single: false,
                imageURLs: [],
                videoURL: nil,
                webURL: nil,
                lifeArea: .sleep,
                series: "s",
                seriesPosition: n
            )
        }
        _ = try await f.store.importImpulses(steps, tenant: f.acme)
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        _ = try await f.store.recordDeliveries([
            NewDelivery(
                tenant: f.acme,
                user: f.a.id,
                impulse: try ImpulseID("s-1"),
                kind: .scheduled,
                localDate: "2027-01-14",
                assignedAt: at
            ),
            NewDelivery(
                tenant: f.acme,
                user: f.a.id,
                impulse: try ImpulseID("s-2"),
                kind: .scheduled,
                localDate: "2027-01-15",
                assignedAt: at.addingTimeInterval(86_400)
            ),
            NewDelivery(
                tenant: f.acme,
                user: f.b.id,
                impulse: try ImpulseID("one"),
                kind: .manual,
                assignedAt: at.addingTimeInterval(-90 * 86_400)
            ),
            NewDelivery(
                tenant: f.globex,
                user: f.globexA.id,
                impulse: try ImpulseID("one"),
                kind: .manual,
                assignedAt: at
            ),
        ])
        let histories = try await f.store.selectionHistories(
            tenant: f.acme,
            users: [f.a.id, f.b.id, f.globexA.id],
            since: at.addingTimeInterval(-30 * 86_400)
        )
        #expect(histories[f.a.id]?.seriesProgress == ["s": 2])
        #expect(Set(histories[f.a.id]?.recent.keys ?? [:].keys) == [try ImpulseID("s-1"), try ImpulseID("s-2")])
        #expect(histories[f.a.id]?.recent[try ImpulseID("s-2")] == at.addingTimeInterval(86_400))
        // b's delivery is older than the window; b still has an (empty) history.
        #expect(histories[f.b.id] == SelectionHistory())
        // Asked under acme, globex's user shows nothing of globex.
        #expect(histories[f.globexA.id] == SelectionHistory())
        // A batch wider than one statement's list: a's row is in the second, padded, chunk.
        let many = try await f.store.selectionHistories(
            tenant: f.acme,
            users: (10_000..<10_600).map { UserID(Int64($0)) } + [f.a.id],
            since: at.addingTimeInterval(-30 * 86_400)
        )
        #expect(many.count == 601)
        #expect(many[f.a.id] == histories[f.a.id])
        #expect(many.values.filter { $0 != SelectionHistory() }.count == 1)
    }
}

@Suite("Push targets")
struct PushTargetStoreTests {
    @Test("Devices and unread counts for a batch of users, in their tenant only", arguments: StoreKind.allCases)
    func batch(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        _ = try await f.store.registerDevice(try f.device(f.a, token: String(repeating: "0a", count: 32)))
        _ = try await f.store.registerDevice(try f.device(f.a, token: String(repeating: "0b", count: 32)))
        _ = try await f.store.registerDevice(try f.device(f.globexA, token: String(repeating: "0c", count: 32)))
        _ = try await f.store.recordDeliveries(
            try [f.a, f.a, f.globexA].map {
                NewDelivery(
                    tenant: $0.tenant,
                    user: $0.id,
                    impulse: try ImpulseID("one"),
                    kind: .manual,
                    assignedAt: Date()
                )
            }
        )
        let targets = try await f.store.pushTargets(tenant: f.acme, users: [f.a.id, f.b.id, f.globexA.id])
        #expect(targets[f.a.id]?.devices.count == 2)
        #expect(targets[f.a.id]?.unreadCount == 2)
        #expect(targets[f.b.id] == PushTarget(devices: [], unreadCount: 0))
        #expect(targets[f.globexA.id] == PushTarget(devices: [], unreadCount: 0))  // asked under acme
    }
}
