import Engine
import Foundation
import Gateway
import TestSupport
import Testing

@Suite("Android devices through the app's API", .timeLimit(.minutes(2)))
struct AndroidDeviceTests {
    static let fcmToken = "eXaMpLe-Fcm:APA91bH" + String(repeating: "k9_Z", count: 30)
    static let iPhone = String(repeating: "ab", count: 32)

    @Test(
        "An Android phone registers with platform fcm; the push goes to FCM and the iPhone's to APNs, each once",
        arguments: TestDatabase.allCases
    )
    func registersAndReceives(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, fcm: .embeddedSimulator) { broker in
            let android = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.fcmToken)",
                body: #"{"name": "Pixel 9", "platform": "fcm"}"#
            )
            #expect(android.status == 201, "\(android.text)")
            #expect(android.json["platform"] as? String == "fcm")
            #expect(android.json["token"] as? String == Self.fcmToken)
            let phone = try await broker.send(.PUT, "/v1/devices/\(Self.iPhone)", body: #"{"name": "iPhone"}"#)
            #expect(phone.status == 201)
            let listed = try await broker.send(.GET, "/v1/devices")
            let platforms = (listed.json["devices"] as? [[String: Any]] ?? []).compactMap { $0["platform"] as? String }
            #expect(platforms.sorted() == ["apns", "fcm"])

            let sent = try await broker.sendPush("command=send&impulse=acme-3&target=alice")
            #expect(sent.status == 200)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.count == 1 && simulator.fcmAccepted.count == 1 })
            let message = try #require(simulator.fcmAccepted.first)
            #expect(message.token == Self.fcmToken)
            #expect(message.title == "Title acme-3")
            #expect(message.data["unread_count"] == "13" && message.data["impulse_id"] == "acme-3")
            #expect(message.priority == "HIGH")
            // One collapse key per delivery, on both channels: a resend replaces the first.
            #expect(message.collapseKey == simulator.accepted.first?.collapseID)
            #expect(message.collapseKey.map { $0.hasPrefix("impulse-") } == true)

            // The ledger tells the channels apart: the delivery was taken by both, and its read counts on both.
            let listedDelivery = try await eventually {
                let page = try await broker.send(.GET, "/t/acme/admin/v1/users/alice/deliveries?limit=1", user: "root")
                let first = (page.json["items"] as? [[String: Any]])?.first
                return first?["channels"] as? [String] == ["apns", "fcm"] && first?["pushedAt"] is Int
            }
            #expect(listedDelivery)
            #expect(try await broker.send(.PUT, "/v1/impulses/acme-3/read").status < 300)
            let counted = try await eventually {
                let report = try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement", user: "root")
                let channels = (report.json["total"] as? [String: Any])?["channels"] as? [String: [String: Any]]
                let fcm = channels?["fcm"]
                return fcm?["pushed"] as? Int == 1 && fcm?["read"] as? Int == 1 && fcm?["readRate"] as? Double == 1
                    && (channels?["apns"]?["read"] as? Int ?? 0) >= 1
            }
            #expect(counted)
            let csv = try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement/channels.csv", user: "root")
            #expect(csv.status == 200 && csv.text.hasPrefix("day,channel,pushed,read,read_rate\r\n"))
            #expect(csv.text.contains(",fcm,1,1,1.0000\r\n"), "\(csv.text.suffix(300))")
            let export = try await broker.send(.GET, "/t/acme/admin/v1/users/alice/export", user: "root")
            let exported = (export.json["devices"] as? [[String: Any]] ?? []).compactMap { $0["platform"] as? String }
            #expect(exported.sorted() == ["apns", "fcm"], "\(export.text.prefix(400))")
            let exportedDelivery = (export.json["deliveries"] as? [[String: Any]])?.first {
                $0["impulse"] as? String == "acme-3"
            }
            #expect(exportedDelivery?["channels"] as? [String] == ["apns", "fcm"])

            // The tenant's admin sees the FCM pool its Android pushes went through.
            let inspect = try await broker.send(.GET, "/v1/admin/inspect", user: "root")
            let tenant = try #require((inspect.json["tenants"] as? [[String: Any]])?.first)
            let fcm = try #require(tenant["fcm"] as? [String: Any], "\(inspect.text)")
            #expect(fcm["identity"] as? String == "default" && fcm["project"] as? String == "impulse-simulated")
            #expect(fcm["credential"] as? String == "usable" && fcm["tokenExchanges"] as? Int == 1)
            #expect(fcm["pushesSent"] as? Int == 0)  // the default account's counters are the operator's to see
            #expect((fcm["connections"] as? [[String: Any]])?.isEmpty == false)

            // One owner per device: bob's registration moves it; his logout's unregister removes it.
            let moved = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.fcmToken)",
                user: "bob",
                body: #"{"name": "Pixel 9", "platform": "fcm"}"#
            )
            #expect(moved.status == 200)
            let alicesNow = try await broker.send(.GET, "/v1/devices")
            #expect((alicesNow.json["devices"] as? [[String: Any]])?.count == 1)
            #expect(try await broker.send(.DELETE, "/v1/devices/\(Self.fcmToken)", user: "bob").status == 204)
            let bobs = try await broker.send(.GET, "/v1/devices", user: "bob")
            #expect((bobs.json["devices"] as? [[String: Any]])?.isEmpty == true)
        }
    }

    @Test(
        "A revoked FCM access token goes round the gateway's resend loop: renewed, the push sent again and taken once",
        arguments: TestDatabase.allCases
    )
    func revokedAccessToken(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, fcm: .embeddedSimulator) { broker in
            let android = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.fcmToken)",
                body: #"{"name": "Pixel 9", "platform": "fcm"}"#
            )
            #expect(android.status == 201, "\(android.text)")
            let simulator = try #require(broker.application.simulator)
            #expect(try await broker.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
            #expect(try await eventually { simulator.fcmAccepted.count == 1 })
            // FCM forgets the token (a revocation): the next push is refused 401, renewed and sent again.
            simulator.revokeFCMAccessTokens()
            #expect(try await broker.sendPush("command=send&impulse=acme-4&target=alice").status == 200)
            #expect(try await eventually { simulator.fcmAccepted.count == 2 })
            let counts = simulator.fcmCounts
            #expect(counts.tokensIssued == 2 && counts.rejected == 1, "\(counts)")
            let inspect = try await broker.send(.GET, "/v1/admin/inspect", user: "root")
            let tenant = try #require((inspect.json["tenants"] as? [[String: Any]])?.first)
            let fcm = try #require(tenant["fcm"] as? [String: Any], "\(inspect.text)")
            #expect(fcm["credential"] as? String == "usable" && fcm["tokenExchanges"] as? Int == 2)
            let listed = try await eventually {
                let page = try await broker.send(.GET, "/t/acme/admin/v1/users/alice/deliveries?limit=1", user: "root")
                let first = (page.json["items"] as? [[String: Any]])?.first
                return (first?["impulse"] as? [String: Any])?["workingID"] as? String == "acme-4"
                    && first?["channels"] as? [String] == ["fcm"]
            }
            let page = try await broker.send(.GET, "/t/acme/admin/v1/users/alice/deliveries?limit=1", user: "root")
            #expect(listed, "\(page.text)")
        }
    }

    @Test(
        "A platform the broker does not serve (422), an unknown platform (400) and a malformed FCM token (422) are refused"
    )
    func refusals() async throws {
        try await TestBroker.run { broker in
            let unserved = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.fcmToken)",
                body: #"{"name": "Pixel", "platform": "fcm"}"#
            )
            #expect(unserved.status == 422)
            #expect(unserved.headers.first(name: "content-type") == "application/problem+json")
            #expect(unserved.text.contains("platform-not-served"))
            let unknown = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.fcmToken)",
                body: #"{"name": "Pixel", "platform": "android"}"#
            )
            #expect(unknown.status == 400)
            let devices = try await broker.store.devices(
                tenant: Fixture.acme,
                owner: try #require(
                    try await broker.store.user(tenant: Fixture.acme, username: "alice")
                ).id
            )
            #expect(devices.allSatisfy { $0.channel == .apns })
        }
        try await TestBroker.run(fcm: .embeddedSimulator) { broker in
            for token in ["short", "with space in it and long enough", String(repeating: "x", count: 4097)] {
                let answer = try await broker.send(
                    .PUT,
                    "/v1/devices/\(token.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? token)",
                    body: #"{"name": "Pixel", "platform": "fcm"}"#
                )
                // Well-formed JSON, an invalid token: 422, as for an APNs token.
                #expect(answer.status == 422, "\(token.prefix(20)): \(answer.status)")
                #expect(answer.text.contains("FCM registration token"))
            }
        }
    }
}
