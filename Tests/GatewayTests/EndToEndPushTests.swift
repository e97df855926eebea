import Engine
import Foundation
import Gateway
import TestSupport
import Testing

@Suite("Push end to end", .timeLimit(.minutes(2)))
struct EndToEndPushTests {
    @Test(
        "Register through REST, send from /SendPush, the simulator records the push, the app fetches the impulse",
        arguments: TestDatabase.allCases
    )
    func endToEnd(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let token = String(repeating: "c0ffee", count: 8) + "00112233445566778899aabbccddeeff"
            let registered = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "Alice's iPhone"}"#
            )
            #expect(registered.status == 204)
            let sent = try await broker.sendPush("command=send&impulse=acme-3&target=alice")
            #expect(sent.status == 200)
            #expect(sent.text.contains("queued its push"))
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.count == 1 })
            let push = try #require(simulator.accepted.first)
            #expect(push.token == token)
            #expect(push.topic == "com.acme.impulse" && push.pushType == "alert" && push.priority == 10)
            let payload = try JSONSerialization.jsonObject(with: Data(push.payload.utf8)) as? [String: Any]
            let aps = try #require(payload?["aps"] as? [String: Any])
            // Twelve seeded unread impulses plus this one: the badge is the true unread count.
            #expect(aps["badge"] as? Int == 13)
            #expect(aps["sound"] == nil)
            #expect((aps["alert"] as? [String: String])?["title"] == "Title acme-3")
            #expect(payload?["impulseID"] as? String == "acme-3")
            // APNs keeps it for an offline phone until the end of alice's day (the tenant's zone, Berlin).
            var berlin = Calendar(identifier: .gregorian)
            berlin.timeZone = try #require(TimeZone(identifier: "Europe/Berlin"))
            let midnight = try #require(berlin.date(byAdding: .day, value: 1, to: berlin.startOfDay(for: Date())))
            #expect(push.expiration == Int(midnight.timeIntervalSince1970), "\(String(describing: push.expiration))")
            let current = try await broker.send(.GET, "/CurrentImpulse?limit=1")
            #expect((current.json["items"] as? [[String: Any]])?.first?["workingID"] as? String == "acme-3")
            // The ledger recorded the push with APNs' id, and the collapse id is the delivery's.
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice"))
            #expect(
                try await eventually {
                    let newest = try await broker.store.deliveredImpulses(
                        tenant: Fixture.acme,
                        user: alice.id,
                        after: nil,
                        before: nil,
                        limit: 1
                    )
                    return newest.first?.delivery.apnsID == push.apnsID && newest.first?.delivery.pushedAt != nil
                }
            )
            let newest = try await broker.store.deliveredImpulses(
                tenant: Fixture.acme,
                user: alice.id,
                after: nil,
                before: nil,
                limit: 1
            )
            #expect(push.collapseID == "impulse-\(try #require(newest.first).delivery.id.rawValue)")
        }
    }

    @Test("A tenant that asks for it gets apns-expiration 0: APNs tries once", arguments: TestDatabase.allCases)
    func immediateExpiry(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            try await broker.store.setPushExpiry(tenant: Fixture.acme, .immediate)
            let token = String(repeating: "ab", count: 32)
            let registered = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#
            )
            #expect(registered.status == 204)
            #expect(try await broker.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.count == 1 })
            #expect(simulator.accepted.first?.expiration == 0)
        }
    }

    @Test(
        "A token APNs reports unregistered after its registration is removed; one registered later is kept",
        arguments: TestDatabase.allCases
    )
    func unregisteredTokens(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let simulator = try #require(broker.application.simulator)
            let stale = String(repeating: "aa", count: 32)
            let fresh = String(repeating: "bb", count: 32)
            for token in [stale, fresh] {
                let reply = try await broker.send(
                    .POST,
                    "/RegisterToken",
                    body: #"{"DeviceToken": "\#(token)", "DeviceName": "x"}"#
                )
                #expect(reply.status == 204)
            }
            simulator.setToken(stale, .unregistered(since: Date().addingTimeInterval(60)))
            simulator.setToken(fresh, .unregistered(since: Date().addingTimeInterval(-3600)))
            _ = try await broker.sendPush("command=send&impulse=acme-1&target=alice")
            #expect(
                try await eventually {
                    let devices = try await broker.send(.GET, "/v1/devices").json["devices"] as? [[String: Any]]
                    return devices?.compactMap { $0["token"] as? String } == [fresh]
                }
            )
        }
    }

    @Test(
        "SendPush is for admins; its commands fill, clear, arm a failure and set a token; output is escaped",
        arguments: TestDatabase.allCases
    )
    func adminCommands(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            #expect(try await broker.send(.GET, "/SendPush").status == 403)
            let page = try await broker.send(.GET, "/SendPush", user: "root")
            #expect(page.status == 200 && page.headers["content-type"].first == "text/html; charset=utf-8")
            #expect(page.text.contains("<td>alice</td><td>12</td>"))
            #expect(
                try await broker.sendPush("command=fill").text
                    .contains("all 12")
            )
            #expect(
                try await broker.sendPush("command=clear").text
                    .contains("removed your 12")
            )
            _ = try await broker.sendPush("command=error")
            #expect(try await broker.send(.GET, "/CurrentImpulse", user: "root").status == 500)
            #expect(try await broker.send(.GET, "/CurrentImpulse", user: "root").status == 200)
            let token = String(repeating: "dd", count: 32)
            let set = try await broker.sendPush("command=token&token=\(token)")
            #expect(set.text.contains("dddd…dddd") && !set.text.contains(token))
            #expect(
                try await broker.sendPush("command=nope").status
                    == 422
            )
            try await Fixture.addUser(broker.store, Fixture.acme, "<script>x</script>", "p")
            let escaped = try await broker.send(.GET, "/SendPush", user: "root")
            #expect(escaped.text.contains("&lt;script&gt;x&lt;/script&gt;") && !escaped.text.contains("<script>x"))
        }
    }

    @Test(
        "SendPush refuses posts from other sites and without the page's token; the page forbids framing",
        arguments: TestDatabase.allCases
    )
    func crossSiteRequests(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, plain: true) { broker in
            let form = ("Content-Type", "application/x-www-form-urlencoded")
            let page = try await broker.send(.GET, "/SendPush", user: "root")
            #expect(page.headers["x-frame-options"].first == "DENY")
            #expect(page.headers["content-security-policy"].first?.contains("frame-ancestors 'none'") == true)
            #expect(page.headers["referrer-policy"].first == "no-referrer")
            #expect(page.headers["strict-transport-security"].first == "max-age=31536000")
            let token = try #require(TestBroker.csrfToken(in: page.text))
            // What a cross-site form post carries: the admin's credentials, but another origin and no token.
            let forged = try await broker.send(
                .POST,
                "/SendPush",
                user: "root",
                headers: [form, ("Origin", "https://evil.example")],
                body: "command=fill"
            )
            #expect(forged.status == 403)
            let withToken = try await broker.send(
                .POST,
                "/SendPush",
                user: "root",
                headers: [form, ("Origin", "https://evil.example")],
                body: "command=fill&csrf=\(token)"
            )
            #expect(withToken.status == 403)
            let fetchSite = try await broker.send(
                .POST,
                "/SendPush",
                user: "root",
                headers: [form, ("Sec-Fetch-Site", "cross-site")],
                body: "command=fill&csrf=\(token)"
            )
            #expect(fetchSite.status == 403)
            let noToken = try await broker.send(.POST, "/SendPush", user: "root", headers: [form], body: "command=fill")
            #expect(noToken.status == 403 && noToken.text.contains("csrf-token-invalid"))
            let badToken = try await broker.send(
                .POST,
                "/SendPush",
                user: "root",
                headers: [form],
                body: "command=fill&csrf=1.\(String(repeating: "0", count: 64))"
            )
            #expect(badToken.status == 403)
            // Nothing was assigned by any of them.
            let after = try await broker.send(.GET, "/SendPush", user: "root")
            #expect(after.text.contains("<td>root</td><td>0</td>"))
            // Another admin's token is not this admin's.
            #expect(
                try await broker.send(
                    .POST,
                    "/SendPush",
                    user: "root",
                    headers: [form, ("Origin", "https://127.0.0.1:\(broker.httpsPort)")],
                    body: "command=fill&csrf=\(token)"
                ).status == 200
            )
            // The plain listener (behind a TLS proxy) does not claim HSTS itself.
            let plain = try await broker.send(.GET, "/health", user: nil, plain: true)
            #expect(plain.headers["strict-transport-security"].isEmpty)
        }
    }
}

extension TestBroker {
    /// The csrf token of a `/SendPush` page.
    static func csrfToken(in page: String) -> String? {
        page.firstMatch(of: /name="csrf" value="([0-9a-f.]+)"/).map { String($0.1) }
    }

    /// Posts a `/SendPush` form as root, with the token of a page just loaded.
    func sendPush(_ body: String) async throws -> Reply {
        let page = try await send(.GET, "/SendPush", user: "root")
        let token = Self.csrfToken(in: page.text) ?? ""
        return try await send(
            .POST,
            "/SendPush",
            user: "root",
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: body + "&csrf=" + token
        )
    }
}
