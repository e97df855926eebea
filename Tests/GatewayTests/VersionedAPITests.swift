import Engine
import Foundation
import Gateway
import Testing

@Suite("Versioned API", .timeLimit(.minutes(2)))
struct VersionedAPITests {
    @Test(
        "Every GET that returns an impulse marks it fetched, as CurrentImpulse does; HEAD marks nothing",
        arguments: TestDatabase.allCases
    )
    func fetchedMarks(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice"))
            func fetched(_ impulse: String) async throws -> Bool {
                try await broker.store.deliveredImpulses(
                    tenant: Fixture.acme,
                    user: alice.id,
                    after: nil,
                    before: nil,
                    limit: 100
                ).first { $0.impulse.id.rawValue == impulse }?.delivery.fetchedAt != nil
            }
            #expect(try await broker.send(.HEAD, "/v1/impulses/acme-2").status == 200)
            #expect(try await broker.send(.HEAD, "/v1/impulses").status == 200)
            #expect(try await broker.send(.HEAD, "/CurrentImpulse").status == 200)
            #expect(try await fetched("acme-2") == false)
            let one = try await broker.send(.GET, "/v1/impulses/acme-2")
            #expect(one.status == 200)
            #expect(one.json["fetchedAt"] is Int, "\(one.text)")
            #expect(try await fetched("acme-2"))
            #expect(try await fetched("acme-3") == false)
        }
    }

    @Test("Impulse list pages with limit, next and since; fetched marks are recorded", arguments: TestDatabase.allCases)
    func paging(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let first = try await broker.send(.GET, "/v1/impulses?limit=5")
            #expect(first.status == 200)
            let items = try #require(first.json["items"] as? [[String: Any]])
            #expect(items.count == 5)
            #expect(first.json["unreadCount"] as? Int == 12)
            #expect(items.allSatisfy { $0["fetchedAt"] is Int && $0["read"] as? Bool == false })
            let next = try #require(first.json["next"] as? String)
            let second = try await broker.send(.GET, next)
            let secondItems = try #require(second.json["items"] as? [[String: Any]])
            #expect(
                secondItems.compactMap { ($0["impulse"] as? [String: Any])?["workingID"] as? String }
                    == (3...7).reversed().map { "acme-\($0)" }
            )
            let third = try await broker.send(.GET, try #require(second.json["next"] as? String))
            #expect((third.json["items"] as? [Any])?.count == 2)
            #expect(third.json["next"] is NSNull)
            let newest = try #require(items.first?["sequence"] as? Int)
            let nothingNew = try await broker.send(.GET, "/v1/impulses?since=\(newest)")
            #expect((nothingNew.json["items"] as? [Any])?.isEmpty == true)
            // Fetched marks are durable, not only in memory.
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice"))
            let stored = try await broker.store.deliveredImpulses(
                tenant: Fixture.acme,
                user: alice.id,
                after: nil,
                before: nil,
                limit: 100
            )
            #expect(stored.filter { $0.delivery.fetchedAt != nil }.count == 12)
        }
    }

    @Test(
        "Get one impulse, mark it read (idempotently), and see the unread count fall",
        arguments: TestDatabase.allCases
    )
    func readMarks(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let one = try await broker.send(.GET, "/v1/impulses/acme-4")
            #expect(one.status == 200)
            #expect((one.json["impulse"] as? [String: Any])?["workingID"] as? String == "acme-4")
            #expect(one.json["read"] as? Bool == false)
            let read = try await broker.send(.PUT, "/v1/impulses/acme-4/read")
            #expect(read.status == 200)
            #expect(read.json["read"] as? Bool == true)
            let readAt = try #require(read.json["readAt"] as? Int)
            let again = try await broker.send(.PUT, "/v1/impulses/acme-4/read")
            #expect(again.json["readAt"] as? Int == readAt)
            let me = try await broker.send(.GET, "/v1/me")
            #expect(me.json["unreadCount"] as? Int == 11)
            // acme-1 is older than the ledger's hot items: the count must still be right.
            _ = try await broker.send(.PUT, "/v1/impulses/acme-1/read")
            #expect(try await broker.send(.GET, "/v1/me").json["unreadCount"] as? Int == 10)
            #expect(try await broker.send(.GET, "/v1/impulses/acme-404").status == 404)
            #expect(try await broker.send(.GET, "/v1/impulses/acme-4", user: "bob").status == 404)
        }
    }

    @Test("The profile shows the tenant's default quiet hours and programme days, as the scheduler applies them")
    func profileMatchesScheduler() async throws {
        try await TestBroker.run { broker in
            let patched = try await broker.send(
                .PATCH,
                "/admin/v1/tenants/acme",
                user: nil,
                headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
                body: #"{"quietHours": {"start": "21:00", "end": "07:00"}, "weekdays": [1, 2, 3, 4, 5]}"#
            )
            #expect(patched.status == 200, "\(patched.text)")
            let me = try await broker.send(.GET, "/v1/me")
            let shown = try #require(me.json["preferences"] as? [String: Any], "\(me.text)")
            #expect(shown["quietHours"] as? [String: String] == ["start": "21:00", "end": "07:00"], "\(me.text)")
            #expect(shown["weekdays"] as? [Int] == [1, 2, 3, 4, 5], "\(me.text)")
            // The scheduler's view of the same user: the same quiet hours and days, and so a Saturday is no
            // delivery day and a delivery time at 22:00 fires at 07:00 the next morning.
            let tenant = try #require(try await broker.store.tenant(Fixture.acme))
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice"))
            let schedule = DailySchedule(
                user: alice.id,
                tenant: tenant,
                preferences: alice.preferences,
                spreadWindow: .zero
            )
            #expect(schedule.weekdays.days == shown["weekdays"] as? [Int])
            #expect(schedule.quietHours.map { "\($0.start)-\($0.end)" } == "21:00-07:00")
            // A user's own days choose among the programme's: the profile shows what is left.
            let own = try await broker.send(.PUT, "/v1/me/preferences", body: #"{"weekdays": [5, 6, 7]}"#)
            #expect((own.json["preferences"] as? [String: Any])?["weekdays"] as? [Int] == [5], "\(own.text)")
        }
    }

    @Test(
        "Profile shows defaults; preferences update, and invalid ones get 422 and change nothing",
        arguments: TestDatabase.allCases
    )
    func preferences(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let me = try await broker.send(.GET, "/v1/me")
            #expect(me.json["username"] as? String == "alice")
            #expect(me.json["tenant"] as? String == "acme")
            let defaults = try #require(me.json["preferences"] as? [String: Any])
            #expect(defaults["timeZone"] as? String == "Europe/Berlin")
            #expect(defaults["deliveryTime"] as? String == "08:00")
            let update =
                #"{"timeZone": "Asia/Tokyo", "deliveryTime": "07:15", "quietHours": {"start": "22:00", "end": "06:30"}, "weekdays": [1,2,3,4,5], "language": "de"}"#
            let updated = try await broker.send(.PUT, "/v1/me/preferences", body: update)
            #expect(updated.status == 200)
            #expect(updated.json["language"] as? String == "DE")
            let preferences = try #require(updated.json["preferences"] as? [String: Any])
            #expect(preferences["timeZone"] as? String == "Asia/Tokyo")
            #expect(preferences["weekdays"] as? [Int] == [1, 2, 3, 4, 5])
            for bad in [
                #"{"timeZone": "Mars/Olympus"}"#, #"{"deliveryTime": "25:00"}"#, #"{"weekdays": [0]}"#,
                #"{"language": "x"}"#,
            ] {
                let reply = try await broker.send(.PUT, "/v1/me/preferences", body: bad)
                #expect(reply.status == 400 || reply.status == 422, "\(bad)")
                #expect(reply.headers["content-type"].first == "application/problem+json")
            }
            let after = try await broker.send(.GET, "/v1/me")
            #expect((after.json["preferences"] as? [String: Any])?["timeZone"] as? String == "Asia/Tokyo")
        }
    }

    @Test(
        "PUT and DELETE on a device are idempotent and never touch another user's token",
        arguments: TestDatabase.allCases
    )
    func devices(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let token = String(repeating: "9a", count: 32)
            let created = try await broker.send(
                .PUT,
                "/v1/devices/\(token)",
                body: #"{"name": "iPad", "environment": "sandbox"}"#
            )
            #expect(created.status == 201)
            #expect(created.headers["location"].first == "/v1/devices/\(token)")
            #expect(created.json["environment"] as? String == "sandbox")
            let refreshed = try await broker.send(.PUT, "/v1/devices/\(token)", body: #"{"name": "iPad"}"#)
            #expect(refreshed.status == 200)
            #expect(try await broker.send(.DELETE, "/v1/devices/\(token)", user: "bob").status == 204)
            #expect((try await broker.send(.GET, "/v1/devices").json["devices"] as? [Any])?.count == 1)
            #expect(try await broker.send(.DELETE, "/v1/devices/\(token)").status == 204)
            #expect(try await broker.send(.DELETE, "/v1/devices/\(token)").status == 204)
            #expect((try await broker.send(.GET, "/v1/devices").json["devices"] as? [Any])?.isEmpty == true)
            let bad = try await broker.send(.PUT, "/v1/devices/xyz", body: #"{"name": "x"}"#)
            #expect(bad.status == 422)
            let badEnvironment = try await broker.send(
                .PUT,
                "/v1/devices/\(token)",
                body: #"{"name": "x", "environment": "moon"}"#
            )
            #expect(badEnvironment.status == 400)
            #expect((try await broker.send(.GET, "/v1/devices").json["devices"] as? [Any])?.isEmpty == true)
        }
    }
}

@Suite("Media and persistence", .timeLimit(.minutes(2)))
struct MediaAndPersistenceTests {
    @Test("Media is public and supports byte ranges")
    func media() async throws {
        try await TestBroker.run { broker in
            try FileManager.default.createDirectory(
                atPath: broker.directory + "/media/acme",
                withIntermediateDirectories: true
            )
            try Data("0123456789".utf8).write(to: URL(fileURLWithPath: broker.directory + "/media/acme/clip.txt"))
            let whole = try await broker.send(.GET, "/media/acme/clip.txt", user: nil)
            #expect(whole.version == .http2)
            #expect(whole.status == 200)
            #expect(whole.text == "0123456789")
            // HEAD states the file's length and sends no body.
            let head = try await broker.send(.HEAD, "/media/acme/clip.txt", user: nil)
            #expect(head.status == 200)
            #expect(head.headers["content-length"].first == "10")
            #expect(head.body.isEmpty)
            let range = try await broker.send(
                .GET,
                "/media/acme/clip.txt",
                user: nil,
                headers: [("Range", "bytes=2-5")]
            )
            #expect(range.status == 206)
            #expect(range.text == "2345")
            #expect(range.headers["content-range"].first == "bytes 2-5/10")
            #expect(try await broker.send(.GET, "/media/acme/missing.jpg", user: nil).status == 404)
            let traversal = try await broker.send(.GET, "/media/../broker.sqlite", user: nil)
            #expect(traversal.status == 400 || traversal.status == 404)
            #expect(!traversal.text.contains("SQLite format"))
        }
    }

    @Test("Tokens, read marks and deliveries survive a restart on the same SQLite file")
    func restart() async throws {
        let directory = TestBroker.temporaryDirectory()
        let token = String(repeating: "77", count: 32)
        try await TestBroker.run(directory: directory) { broker in
            let registered = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#
            )
            #expect(registered.status == 204)
            let read = try await broker.send(.PUT, "/v1/impulses/acme-12/read")
            #expect(read.status == 200)
        }
        try await TestBroker.run(directory: directory, seed: false) { broker in
            let devices = try await broker.send(.GET, "/v1/devices")
            #expect((devices.json["devices"] as? [[String: Any]])?.first?["token"] as? String == token)
            let one = try await broker.send(.GET, "/v1/impulses/acme-12")
            #expect(one.json["read"] as? Bool == true)
            #expect(try await broker.send(.GET, "/v1/me").json["unreadCount"] as? Int == 11)
            #expect((try await broker.send(.GET, "/CurrentImpulse?limit=100").json["items"] as? [Any])?.count == 12)
        }
    }
}
