import Foundation
import GRDB
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import Engine

@Suite("Stores: every test on SQLite and on PostgreSQL", .timeLimit(.minutes(4)))
struct StoreTests {
    @Test("Migrations run once; reopening the file keeps the data", arguments: StoreKind.allCases)
    func reopen(_ kind: StoreKind) async throws {
        let fixture = try await StoreFixture.make(kind)
        let reopened = try await StoreFixture.open(kind, fixture.location)
        if let postgres = reopened as? PostgresStore {
            #expect(try await postgres.schemaVersions() == PostgresStore.migrations.map(\.version))
        }
        #expect(try await reopened.tenants().map(\.id) == [fixture.acme, fixture.globex])
        #expect(try await reopened.user(tenant: fixture.acme, username: "a")?.id == fixture.a.id)
    }

    @Test("A token has one owner within a tenant and topic: registering moves it", arguments: StoreKind.allCases)
    func tokenOwner(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        #expect(try await f.store.registerDevice(try f.device(f.a)) == .created)
        #expect(try await f.store.registerDevice(try f.device(f.a, at: 2000)) == .refreshed)
        #expect(try await f.store.registerDevice(try f.device(f.b)) == .moved(from: f.a.id))
        #expect(try await f.store.devices(tenant: f.acme, owner: f.a.id).isEmpty)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.b.id).count == 1)
        // Another tenant's registry is separate.
        #expect(try await f.store.registerDevice(try f.device(f.globexA)) == .created)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.b.id).count == 1)
        // Only the owner unregisters.
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        #expect(try await !f.store.unregisterDevice(tenant: f.acme, topic: "t", token: token, owner: f.a.id))
        #expect(try await f.store.unregisterDevice(tenant: f.acme, topic: "t", token: token, owner: f.b.id))
        #expect(try await f.store.devices(tenant: f.acme, owner: f.b.id).isEmpty)
    }

    @Test(
        "A token APNs removed leaves every read and push target, comes back as new, and is purged after its cutoff",
        arguments: StoreKind.allCases
    )
    func removedTokens(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let kept = String(repeating: "cd", count: 32)
        #expect(try await f.store.registerDevice(try f.device(f.a)) == .created)
        #expect(try await f.store.registerDevice(try f.device(f.a, token: kept)) == .created)
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let remove = TokenVerdict(token: token, kind: .remove(registeredBefore: .distantFuture))
        let quarantine = TokenVerdict(token: token, kind: .quarantine(at: Date()))
        #expect(try await f.store.applyTokenVerdicts(tenant: f.acme, topic: "t", [remove]) == [true])
        // Gone already: neither verdict changes anything again.
        #expect(
            try await f.store.applyTokenVerdicts(tenant: f.acme, topic: "t", [remove, quarantine]) == [false, false]
        )
        #expect(try await f.store.device(tenant: f.acme, topic: "t", token: token) == nil)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.a.id).map(\.token.rawValue) == [kept])
        let targets = try await f.store.pushTargets(tenant: f.acme, users: [f.a.id])
        #expect(targets[f.a.id]?.devices.map(\.token.rawValue) == [kept])
        #expect(try await !f.store.unregisterDevice(tenant: f.acme, topic: "t", token: token, owner: f.a.id))
        // Registered again, by another user: a new registration, not a move from its old owner.
        #expect(try await f.store.registerDevice(try f.device(f.b, at: 3000)) == .created)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.b.id).count == 1)
        #expect(try await f.store.applyTokenVerdicts(tenant: f.acme, topic: "t", [remove]) == [true])
        // The rows stay until the purge, which takes only those gone before its cutoff.
        func rows() async throws -> Int { try await f.count("devices") }
        #expect(try await rows() == 2)
        #expect(try await f.store.purgeRemovedDevices(before: Date().addingTimeInterval(-60)) == 0)
        #expect(try await rows() == 2)
        #expect(try await f.store.purgeRemovedDevices(before: Date().addingTimeInterval(60)) == 1)
        #expect(try await rows() == 1)
        #expect(try await f.store.devices(tenant: f.acme, owner: f.a.id).map(\.token.rawValue) == [kept])
    }

    @Test(
        "The purge of gone devices goes on past its 5,000-row transactions until none is left",
        arguments: StoreKind.allCases
    )
    func purgeInChunks(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let tokens = try (0..<5_001).map { try DeviceToken(String(format: "%064x", $0)) }
        let devices = try tokens.map {
            try Device(
                tenant: f.acme,
                topic: "t",
                token: $0,
                owner: f.a.id,
                name: "p",
                environment: .production,
                registeredAt: Date()
            )
        }
        _ = try await f.store.registerDevices(devices)
        let verdicts = tokens.map { TokenVerdict(token: $0, kind: .remove(registeredBefore: .distantFuture)) }
        #expect(try await f.store.applyTokenVerdicts(tenant: f.acme, topic: "t", verdicts).allSatisfy { $0 })
        #expect(try await f.store.purgeRemovedDevices(before: .distantFuture) == 5_001)
        #expect(try await f.count("devices") == 0)
    }

    @Test("A device cannot be registered for another tenant's user", arguments: StoreKind.allCases)
    func crossTenantDevice(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        var device = try f.device(f.globexA)
        device.tenant = f.acme
        await #expect(throws: EngineError.self) { try await f.store.registerDevice(device) }
        #expect(try await f.store.device(tenant: f.acme, topic: "t", token: device.token) == nil)
    }

    @Test(
        "One scheduled delivery per user and local date; manual ones repeat; other tenants' users are refused",
        arguments: StoreKind.allCases
    )
    func deliveryKeys(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let one = try ImpulseID("one")
        let day = NewDelivery(
            tenant: f.acme,
            user: f.a.id,
            impulse: one,
            kind: .scheduled,
            localDate: "2026-11-22",
            assignedAt: Date()
        )
        #expect(try await f.store.recordDeliveries([day]).count == 1)
        #expect(try await f.store.recordDeliveries([day]).isEmpty)
        var nextDay = day
        nextDay.localDate = "2026-11-23"
        var manual = day
        manual.kind = .manual
        #expect(try await f.store.recordDeliveries([nextDay, manual, manual]).count == 3)
        var foreign = day
        foreign.user = f.globexA.id
        #expect(try await f.store.recordDeliveries([foreign]).isEmpty)
        #expect(try await f.store.unreadCount(tenant: f.acme, user: f.a.id) == 4)
        #expect(try await f.store.unreadCount(tenant: f.globex, user: f.globexA.id) == 0)
    }

    @Test("Marks never overwrite an earlier timestamp, and another tenant cannot mark", arguments: StoreKind.allCases)
    func marks(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let recorded = try await f.store.recordDeliveries([
            NewDelivery(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"), kind: .manual, assignedAt: Date())
        ])
        let id = try #require(recorded.first?.id)
        let early = Date(timeIntervalSince1970: 1000)
        try await f.store.applyMarks([DeliveryMark(tenant: f.globex, delivery: id, kind: .read, at: early)])
        #expect(try await f.store.unreadCount(tenant: f.acme, user: f.a.id) == 1)
        try await f.store.applyMarks([
            DeliveryMark(tenant: f.acme, delivery: id, kind: .fetched, at: early),
            DeliveryMark(tenant: f.acme, delivery: id, kind: .read, at: early.addingTimeInterval(10)),
            DeliveryMark(tenant: f.acme, delivery: id, kind: .read, at: early.addingTimeInterval(99)),
        ])
        let item = try #require(
            try await f.store.deliveredImpulse(tenant: f.acme, user: f.a.id, impulse: try ImpulseID("one"))
        )
        #expect(item.delivery.fetchedAt == early)
        #expect(item.delivery.readAt == early.addingTimeInterval(10))
        #expect(try await f.store.unreadCount(tenant: f.acme, user: f.a.id) == 0)
    }

    /// `count` manual deliveries to user a of acme, awaiting their push (unsettled).
    func awaitingPush(_ f: StoreFixture, _ count: Int) async throws -> [Delivery] {
        let impulse = try ImpulseID("one")
        return try await f.store.recordDeliveries(
            (0..<count).map { _ in
                NewDelivery(
                    tenant: f.acme,
                    user: f.a.id,
                    impulse: impulse,
                    kind: .manual,
                    assignedAt: Date(),
                    awaitsPush: true
                )
            }
        )
    }

    /// A multi-row mark statement finds its rows by id, never by scanning `deliveries`.
    func expectSearchByID(_ f: StoreFixture, _ sql: String, parameters: Int) async throws {
        guard f.kind == .sqlite else { return }  // SQLite's statement only; PostgreSQL joins on the primary key
        let plan = try await f.sqlite.read { db in
            try Row.fetchAll(
                db,
                sql: "EXPLAIN QUERY PLAN " + sql,
                arguments: StatementArguments(Array(repeating: 0, count: parameters))
            )
            .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("SEARCH deliveries USING INTEGER PRIMARY KEY") })
        #expect(!plan.contains { $0.contains("SCAN deliveries") })
    }

    @Test(
        "Pushed marks in full statements of 64 and in single rows: first mark wins, other tenants cannot mark",
        arguments: StoreKind.allCases
    )
    func pushedMarksInBulk(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let recorded = try await awaitingPush(f, 150)
        #expect(recorded.count == 150)
        let first = Date(timeIntervalSince1970: 2000)
        // The first 40 are marked once alone, so the bulk pass below must keep those marks.
        try await f.store.applyMarks(
            recorded.prefix(40).map {
                DeliveryMark(
                    tenant: f.acme,
                    delivery: $0.id,
                    kind: .pushed(apnsID: "early-\($0.id)", channels: .apns),
                    at: first
                )
            }
        )
        var marks = recorded.map {
            DeliveryMark(
                tenant: f.acme,
                delivery: $0.id,
                kind: .pushed(apnsID: "late-\($0.id)", channels: [.apns, .fcm]),
                at: first.addingTimeInterval(60)
            )
        }
        // Another tenant's marks for the last 10 are ignored; they are left unmarked.
        for index in 140..<150 { marks[index].tenant = f.globex }
        #expect(marks.count > 2 * SQLiteStore.marksPerStatement)
        try await f.store.applyMarks(marks)
        let rows = try await f.texts(
            """
            SELECT CAST(id AS TEXT), CAST(pushed_at AS TEXT), apns_id, CAST(settled_at AS TEXT),
                CAST(pushed_channels AS TEXT)
            FROM deliveries ORDER BY deliveries.id
            """
        ).map {
            (
                id: Int64($0[0] ?? "") ?? -1, pushedAt: $0[1].flatMap(Double.init), apnsID: $0[2],
                settledAt: $0[3].flatMap(Double.init), channels: $0[4]
            )
        }
        #expect(rows.count == 150)
        for (index, (id, pushedAt, apnsID, settledAt, channels)) in rows.enumerated() {
            switch index {
            case ..<40:
                #expect(pushedAt == 2000 && apnsID == "early-\(id)" && settledAt == 2000 && channels == "1")
            case ..<140:
                // Both channels (APNs 1 + FCM 2), through the statements of 64 and the single rows alike.
                #expect(pushedAt == 2060 && apnsID == "late-\(id)" && settledAt == 2060 && channels == "3")
            default:
                #expect(pushedAt == nil && apnsID == nil && settledAt == nil && channels == nil)
            }
        }
        try await expectSearchByID(f, SQLiteStore.pushedMarksSQL, parameters: 5 * SQLiteStore.marksPerStatement)
    }

    @Test(
        "Settled marks in full statements of 64 and in single rows: first mark wins, other tenants cannot mark",
        arguments: StoreKind.allCases
    )
    func settledMarksInBulk(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let recorded = try await awaitingPush(f, 150)
        let first = Date(timeIntervalSince1970: 2000)
        // The first 40 are settled alone, so the bulk pass below must keep their time.
        try await f.store.applyMarks(
            recorded.prefix(40).map { DeliveryMark(tenant: f.acme, delivery: $0.id, kind: .settled, at: first) }
        )
        var marks = recorded.map {
            DeliveryMark(tenant: f.acme, delivery: $0.id, kind: .settled, at: first.addingTimeInterval(60))
        }
        // Another tenant's marks for the last 10 are ignored; 150 marks make two full statements and 22 single rows.
        for index in 140..<150 { marks[index].tenant = f.globex }
        try await f.store.applyMarks(marks)
        let rows = try await f.texts(
            "SELECT CAST(settled_at AS TEXT), CAST(pushed_at AS TEXT) FROM deliveries ORDER BY id"
        ).map { (settledAt: $0[0].flatMap(Double.init), pushedAt: $0[1].flatMap(Double.init)) }
        #expect(rows.count == 150)
        #expect(rows.allSatisfy { $0.pushedAt == nil })
        #expect(rows.prefix(40).allSatisfy { $0.settledAt == 2000 })
        #expect(rows.dropFirst(40).prefix(100).allSatisfy { $0.settledAt == 2060 })
        #expect(rows.suffix(10).allSatisfy { $0.settledAt == nil })
        try await expectSearchByID(f, SQLiteStore.settledMarksSQL, parameters: 3 * SQLiteStore.marksPerStatement)
    }

    @Test(
        "A batch commit moves only rows still at the fire time it read, records the day either way, logs one change",
        arguments: StoreKind.allCases
    )
    func scheduleCommitCompareAndSet(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let a = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        let b = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.b.id))
        let start = try await f.store.latestChangeSequence()
        let next = PlannedFire(
            date: try LocalDate(parsing: "2026-11-24"),
            fireAt: Date(timeIntervalSince1970: 1_900_000_000)
        )
        func update(_ user: User, expected: Date) throws -> ScheduleUpdate {
            ScheduleUpdate(
                tenant: f.acme,
                user: user.id,
                expectedFireAt: expected,
                delivery: NewDelivery(
                    tenant: f.acme,
                    user: user.id,
                    impulse: try ImpulseID("one"),
                    kind: .scheduled,
                    localDate: "2026-11-23",
                    assignedAt: Date(),
                    awaitsPush: true
                ),
                next: next
            )
        }
        // b's row moved after the batch read it (a preference change): its stale expectation must not move it.
        let recorded = try await f.store.commitSchedules([
            try update(f.a, expected: a.fireAt), try update(f.b, expected: b.fireAt.addingTimeInterval(-60)),
        ])
        #expect(recorded.map(\.user) == [f.a.id, f.b.id])
        let movedA = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.a.id))
        #expect(movedA.fireAt == next.fireAt && movedA.localDate == next.date)
        #expect(movedA.lastDate?.description == "2026-11-23")
        let keptB = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: f.b.id))
        #expect(keptB.fireAt == b.fireAt && keptB.localDate == b.localDate)
        #expect(keptB.lastDate?.description == "2026-11-23")
        let changes = try await f.store.changes(after: start, limit: 10)
        #expect(changes.map(\.subject) == [.ledgers([f.a.id, f.b.id])])
        // A node following the feed drops both users' cached state from one entry.
        let ledger = DeliveryLedger(store: f.store, catalog: CatalogCache(store: f.store))
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.b.id) == 1)
        _ = try await f.store.recordDeliveries([
            NewDelivery(tenant: f.acme, user: f.b.id, impulse: try ImpulseID("two"), kind: .manual, assignedAt: Date())
        ])
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.b.id) == 1)  // still cached
        await ledger.apply(StoreChange(sequence: 0, tenant: f.acme, subject: .ledgers([f.a.id, f.b.id]), origin: "x"))
        #expect(try await ledger.unreadCount(tenant: f.acme, user: f.b.id) == 2)
    }

    @Test(
        "A batch of days committed many to a statement leaves the store as committing them one by one does",
        arguments: StoreKind.allCases
    )
    func scheduleCommitInBulk(_ kind: StoreKind) async throws {
        // Two stores with the same users; the same decisions, in one batch (chunks of 64 go through the
        // multi-row statements) and one update per batch (every one on the one-row statements).
        let bulk = try await StoreFixture.make(kind)
        let single = try await StoreFixture.make(kind)
        var created: [[User]] = [[], []]
        for (index, f) in [bulk, single].enumerated() {
            for n in 0..<150 {
                created[index].append(
                    try await f.store.createUser(try NewUser(tenant: f.acme, username: "u\(n)", passwordHash: "x"))
                )
            }
            // A day already recorded for some users: not recorded again, the row still moves.
            _ = try await f.store.recordDeliveries(
                try stride(from: 0, to: 150, by: 7).map {
                    NewDelivery(
                        tenant: f.acme,
                        user: created[index][$0].id,
                        impulse: try ImpulseID("two"),
                        kind: .scheduled,
                        localDate: "2026-11-23",
                        assignedAt: Date(timeIntervalSince1970: 1000)
                    )
                }
            )
        }
        func updates(_ f: StoreFixture, _ users: [User]) async throws -> [ScheduleUpdate] {
            var updates: [ScheduleUpdate] = []
            for (n, user) in users.enumerated() {
                let entry = try #require(try await f.store.scheduleEntry(tenant: f.acme, user: user.id))
                let next = PlannedFire(
                    date: try LocalDate(parsing: "2026-11-24"),
                    fireAt: Date(timeIntervalSince1970: 1_900_000_000 + Double(n))
                )
                // Every 5th row moved since it was read; every 11th is a move without a day; one names the other
                // tenant's user under this tenant (nothing may be recorded or moved for it). No user twice: a batch
                // that names a user twice goes one by one.
                let target = n == 12 ? f.globexA.id : user.id
                updates.append(
                    ScheduleUpdate(
                        tenant: f.acme,
                        user: target,
                        expectedFireAt: n % 5 == 4 ? entry.fireAt.addingTimeInterval(-60) : entry.fireAt,
                        delivery: n % 11 == 10
                            ? nil
                            : NewDelivery(
                                tenant: f.acme,
                                user: target,
                                impulse: try ImpulseID(n % 2 == 0 ? "one" : "two"),
                                kind: .scheduled,
                                localDate: "2026-11-23",
                                assignedAt: Date(timeIntervalSince1970: 2000 + Double(n)),
                                awaitsPush: n % 3 != 0
                            ),
                        next: n % 17 == 16 ? nil : next
                    )
                )
            }
            return updates
        }
        let bulkUpdates = try await updates(bulk, created[0])
        #expect(bulkUpdates.filter { $0.delivery != nil }.count >= 2 * SQLiteStore.schedulesPerStatement)
        let bulkRecorded = try await bulk.store.commitSchedules(bulkUpdates)
        var singleRecorded: [Delivery] = []
        for update in try await updates(single, created[1]) {
            singleRecorded += try await single.store.commitSchedules([update])
        }
        func strip(_ deliveries: [Delivery]) -> [String] {
            deliveries.map { "\($0.user) \($0.impulse) \($0.kind) \($0.localDate ?? "-") \($0.assignedAt)" }
        }
        #expect(bulkRecorded.count > 100)
        #expect(strip(bulkRecorded) == strip(singleRecorded))
        #expect(bulkRecorded.map(\.id) == bulkRecorded.map(\.id).sorted())
        func contents(_ f: StoreFixture) async throws -> [String] {
            try await f.texts(
                """
                SELECT 'd', CAST(user_id AS TEXT), tenant_id, impulse_id, kind, local_date,
                    CAST(assigned_at AS TEXT), CAST(settled_at AS TEXT)
                FROM deliveries
                UNION ALL
                SELECT 's', CAST(user_id AS TEXT), tenant_id, CAST(fire_at AS TEXT), local_date, last_date, NULL, NULL
                FROM schedules
                ORDER BY 1, 2, 7
                """
            ).map { "\($0)" }
        }
        let bulkContents = try await contents(bulk)
        #expect(bulkContents == (try await contents(single)))
        // The store holds what each case asks for (so the comparison above compares something).
        let byUser = Dictionary(grouping: bulkRecorded, by: \.user)
        #expect(byUser[created[0][7].id] == nil)  // its day already existed
        #expect(byUser[created[0][10].id] == nil)  // a move without a day
        #expect(byUser[bulk.globexA.id] == nil)  // another tenant's user
        #expect(byUser[created[0][1].id]?.first?.impulse == (try ImpulseID("two")))
        let stale = try #require(try await bulk.store.scheduleEntry(tenant: bulk.acme, user: created[0][4].id))
        #expect(
            stale.fireAt != Date(timeIntervalSince1970: 1_900_000_004) && stale.lastDate?.description == "2026-11-23"
        )
        let moved = try #require(try await bulk.store.scheduleEntry(tenant: bulk.acme, user: created[0][3].id))
        #expect(
            moved.fireAt == Date(timeIntervalSince1970: 1_900_000_003) && moved.lastDate?.description == "2026-11-23"
        )
    }
}
