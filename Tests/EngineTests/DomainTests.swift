import Foundation
import Testing

@testable import Engine

@Suite("Domain values")
struct DomainTests {
    @Test("Device tokens: even-length hex, normalised to lower case, printed redacted")
    func deviceTokens() throws {
        let token = try DeviceToken(String(repeating: "AB", count: 32))
        #expect(token.rawValue == String(repeating: "ab", count: 32))
        #expect(!"\(token)".contains(token.rawValue))
        #expect("\(token)" == "abab…abab")
        for bad in [
            "", "abc", "zz" + String(repeating: "00", count: 16), String(repeating: "a", count: 15),
            "ab cd ef 01 23 45 67 89",
        ] {
            #expect(throws: EngineError.self, "\(bad)") { try DeviceToken(bad) }
        }
    }

    @Test("FCM tokens: registration tokens and installation ids, kept as written (case matters), printed redacted")
    func fcmTokens() throws {
        let registration = "dQw4w9WgXcQ:APA91bH" + String(repeating: "x_Y-z", count: 28)
        let token = try DeviceToken(registration, channel: .fcm)
        #expect(token.rawValue == registration)
        #expect(!"\(token)".contains(registration))
        let installation = try DeviceToken("cT0bWq1sQ8y-Fj3Zk_9aBc", channel: .fcm)
        #expect(installation.rawValue == "cT0bWq1sQ8y-Fj3Zk_9aBc")
        // The same characters read as an APNs token are refused: not hex.
        #expect(throws: EngineError.self) { try DeviceToken(registration) }
        for bad in [
            "", "short", "has space" + String(repeating: "a", count: 20), "é" + String(repeating: "a", count: 30),
            String(repeating: "a", count: 4097), "a/b" + String(repeating: "a", count: 20),
        ] {
            #expect(throws: EngineError.self, "\(bad)") { try DeviceToken(bad, channel: .fcm) }
        }
    }

    @Test("Tenant ids are URL-safe slugs")
    func tenantIDs() throws {
        #expect(try TenantID("acme-2").rawValue == "acme-2")
        for bad in ["", "-acme", "Acme", "a/b", "a b", String(repeating: "a", count: 64)] {
            #expect(throws: EngineError.self, "\(bad)") { try TenantID(bad) }
        }
    }

    @Test("Local times parse HH:mm; quiet hours wrap midnight; weekdays are ISO")
    func times() throws {
        #expect(try LocalTime(parsing: "07:05").minuteOfDay == 425)
        #expect(try LocalTime(parsing: "23:59").description == "23:59")
        for bad in ["7:05", "24:00", "12:60", "noon", "12-30"] {
            #expect(throws: EngineError.self, "\(bad)") { try LocalTime(parsing: bad) }
        }
        let night = QuietHours(start: try LocalTime(parsing: "22:00"), end: try LocalTime(parsing: "06:30"))
        #expect(night.contains(try LocalTime(parsing: "23:00")))
        #expect(night.contains(try LocalTime(parsing: "06:29")))
        #expect(!night.contains(try LocalTime(parsing: "06:30")))
        #expect(!night.contains(try LocalTime(parsing: "12:00")))
        let weekdays = try Weekdays([1, 5, 5])
        #expect(weekdays.days == [1, 5])
        #expect(weekdays.contains(5) && !weekdays.contains(6))
        #expect(throws: EngineError.self) { try Weekdays([]) }
        #expect(throws: EngineError.self) { try Weekdays([8]) }
    }

    @Test("Time zones and languages are validated")
    func zonesAndLanguages() throws {
        #expect(try validatedTimeZone("Pacific/Kiritimati") == "Pacific/Kiritimati")
        #expect(throws: EngineError.self) { try validatedTimeZone("Mars/Olympus") }
        #expect(try validatedLanguage("de") == "DE")
        #expect(try validatedLanguage("pt-BR") == "PT-BR")
        #expect(throws: EngineError.self) { try validatedLanguage("x") }
        #expect(throws: EngineError.self) { try LifeAreaScores([1, 2, 3]) }
        #expect(throws: EngineError.self) { try LifeAreaScores(Array(repeating: 101, count: 12)) }
    }

    @Test("Usernames may hold anything printable except ':'")
    func usernames() throws {
        try NewUser.validate(username: "jörg&%ü")
        #expect(throws: EngineError.self) { try NewUser.validate(username: "a:b") }
        #expect(throws: EngineError.self) { try NewUser.validate(username: "tab\there") }
        #expect(throws: EngineError.self) { try NewUser.validate(username: "") }
    }
}

@Suite("Catalog import")
struct CatalogImportTests {
    let tenant = try! TenantID("acme")

    func item(_ id: String, _ extra: String = "") -> String {
        """
        {"workingID": "\(id)", "language": "de", "title": "T", "descriptionShort": "S", "description": "D",
         "duration": 3, "action": "read", "single": true, "imageURLs": ["/media/a.jpg"], "videoURL": null,
         "webURL": "https://example.com", "lifeArea": "sleep"\(extra)}
        """
    }

    @Test("The original item format plus lifeArea imports every field")
    func valid() throws {
        let series = item("s-1", #", "single": false, "series": "calm", "seriesPosition": 1"#)
            .replacingOccurrences(of: #""single": true, "#, with: "")
        let impulses = try CatalogImport.parse(Data(#"{"items": [\#(item("a")), \#(series)]}"#.utf8), tenant: tenant)
        #expect(impulses.count == 2)
        #expect(impulses[0].language == "DE")
        #expect(impulses[0].lifeArea == .sleep)
        #expect(impulses[0].imageURLs == ["/media/a.jpg"])
        #expect(impulses[1].series == "calm" && impulses[1].seriesPosition == 1 && !impulses[1].single)
    }

    @Test(
        "A bad item rejects the whole file and names the item",
        arguments: [
            (#"{"items": [ITEM, ITEM]}"#, "appears twice"),
            (#"{"items": [ITEM_AREA]}"#, "lifeArea"),
            (#"{"items": [ITEM_SERIES]}"#, "series"),
            (#"{"items": [{"workingID": "x"}]}"#, "missing member"),
            (#"{"items": "nope"}"#, "expected"),
            (#"{"items": ["#, "malformed"),
            (#"{"items": [ITEM_URL]}"#, "not an http(s) URL"),
        ]
    )
    func invalid(template: String, message: String) throws {
        let text =
            template
            .replacingOccurrences(of: "ITEM_AREA", with: item("a").replacingOccurrences(of: "sleep", with: "luck"))
            .replacingOccurrences(
                of: "ITEM_SERIES",
                with: item("a").replacingOccurrences(of: #""single": true"#, with: #""single": false"#)
            )
            .replacingOccurrences(
                of: "ITEM_URL",
                with: item("a").replacingOccurrences(of: "/media/a.jpg", with: "ftp://x/y")
            )
            .replacingOccurrences(of: "ITEM", with: item("a"))
        let error = #expect(throws: EngineError.self) { try CatalogImport.parse(Data(text.utf8), tenant: tenant) }
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }
}

@Suite("User ledger state")
struct UserLedgerTests {
    func item(_ id: Int64, read: Bool = false) throws -> Delivery {
        Delivery(
            id: DeliveryID(id),
            tenant: try TenantID("acme"),
            user: UserID(1),
            impulse: try ImpulseID("i\(id)"),
            kind: .manual,
            localDate: nil,
            assignedAt: Date(timeIntervalSince1970: Double(id)),
            readAt: read ? Date() : nil
        )
    }

    @Test("Memory answers a page only when it holds everything the page needs")
    func pages() throws {
        let tenant = try TenantID("acme")
        let partial = UserLedger(
            tenant: tenant,
            recent: try (5...8).reversed().map { try item($0) },
            complete: false,
            unreadCount: 8,
            capacity: 4,
            lastUsed: 0
        )
        #expect(partial.page(after: nil, limit: 3)?.map(\.id.rawValue) == [8, 7, 6])
        #expect(partial.page(after: DeliveryID(6), limit: 10)?.map(\.id.rawValue) == [8, 7])
        // Needs deliveries older than memory holds: the store must answer.
        #expect(partial.page(after: nil, limit: 10) == nil)
        #expect(partial.page(after: DeliveryID(2), limit: 10) == nil)
        let complete = UserLedger(
            tenant: tenant,
            recent: try [item(2), item(1)],
            complete: true,
            unreadCount: 2,
            capacity: 4,
            lastUsed: 0
        )
        #expect(complete.page(after: nil, limit: 10)?.count == 2)
    }

    @Test("Inserting keeps newest first, caps memory, ignores duplicates; read marks count once")
    func changes() throws {
        let tenant = try TenantID("acme")
        var ledger = UserLedger(
            tenant: tenant,
            recent: [try item(1)],
            complete: true,
            unreadCount: 1,
            capacity: 3,
            lastUsed: 0
        )
        ledger.insert([try item(3), try item(2)])
        ledger.insert([try item(3)])
        #expect(ledger.recent.map(\.id.rawValue) == [3, 2, 1])
        #expect(ledger.unreadCount == 3)
        #expect(!ledger.complete)
        let mark = DeliveryMark(tenant: tenant, delivery: DeliveryID(2), kind: .read, at: Date())
        ledger.apply([mark])
        ledger.apply([mark])
        #expect(ledger.unreadCount == 2)
        #expect(ledger.recent[1].readAt != nil && ledger.recent[1].fetchedAt != nil)
    }

    @Test("A push expires at the end of the user's delivery day in their zone, or at once when the tenant asks")
    func pushExpiry() throws {
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        let now = try #require(ISO8601DateFormatter().date(from: "2026-11-23T10:00:00Z"))  // 19:00 in Tokyo
        let end = try #require(ISO8601DateFormatter().date(from: "2026-11-23T15:00:00Z"))  // midnight in Tokyo
        #expect(PushExpiry.endOfDay.expiration(localDate: "2026-11-23", timeZone: tokyo, now: now) == end)
        #expect(PushExpiry.endOfDay.expiration(localDate: nil, timeZone: tokyo, now: now) == end)
        // A day already over (a push retried after midnight) goes once, not with a past expiration.
        #expect(PushExpiry.endOfDay.expiration(localDate: "2026-11-22", timeZone: tokyo, now: now) == nil)
        #expect(PushExpiry.immediate.expiration(localDate: "2026-11-23", timeZone: tokyo, now: now) == nil)
        // A 23-hour day: the end is the next local midnight, not 24 hours on.
        let berlin = try #require(TimeZone(identifier: "Europe/Berlin"))
        let spring = try #require(ISO8601DateFormatter().date(from: "2026-03-29T08:00:00Z"))
        let springEnd = try #require(ISO8601DateFormatter().date(from: "2026-03-29T22:00:00Z"))
        #expect(PushExpiry.endOfDay.expiration(localDate: "2026-03-29", timeZone: berlin, now: spring) == springEnd)
    }
}
