import Engine
import Foundation
import Gateway
import Testing

@Suite("Original API", .timeLimit(.minutes(2)))
struct OriginalAPITests {
    @Test(
        "CurrentImpulse: the original members and types, absolute URLs, newest first, last 10, over HTTP/2",
        arguments: TestDatabase.allCases
    )
    func currentImpulse(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let reply = try await broker.send(.GET, "/CurrentImpulse")
            #expect(reply.status == 200)
            #expect(reply.version == .http2)
            #expect(reply.headers["content-type"].first == "application/json; charset=utf-8")
            let items = try #require(reply.json["items"] as? [[String: Any]])
            #expect(items.count == 10)
            #expect(items.map { $0["workingID"] as? String } == (3...12).reversed().map { "acme-\($0)" })
            let first = try #require(items.first)
            #expect(
                Set(first.keys) == [
                    "single", "soundURL", "imageURLs", "timestamp", "duration", "title", "description", "webURL",
                    "action",
                    "language", "descriptionShort", "workingID", "videoURL",
                ]
            )
            #expect(first["soundURL"] is NSNull)
            #expect(first["videoURL"] is NSNull)
            #expect(first["single"] as? Bool == true)
            #expect(first["duration"] as? Int == 5)
            #expect(first["timestamp"] as? Int == 1_700_000_000 + 12 * 86_400)
            #expect(first["webURL"] as? String == "https://example.com/acme-12")
            #expect(
                first["imageURLs"] as? [String] == [
                    "https://127.0.0.1:\(broker.httpsPort)/media/acme/acme-12.jpg",
                    "https://cdn.example.com/acme-12.png",
                ]
            )
            // The raw bytes carry JSON booleans and nulls, not strings or omitted members.
            #expect(reply.text.contains("\"single\":true") && reply.text.contains("\"videoURL\":null"))
        }
    }

    @Test("CurrentImpulse pages with limit and since, and rejects bad numbers", arguments: TestDatabase.allCases)
    func currentImpulseQuery(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let three = try await broker.send(.GET, "/CurrentImpulse?limit=3")
            #expect((three.json["items"] as? [Any])?.count == 3)
            let all = try await broker.send(.GET, "/CurrentImpulse?limit=100")
            #expect((all.json["items"] as? [Any])?.count == 12)
            let newest = try await broker.send(.GET, "/v1/impulses?limit=1")
            let sequence = try #require(((newest.json["items"] as? [[String: Any]])?.first?["sequence"]) as? Int)
            let since = try await broker.send(.GET, "/CurrentImpulse?since=\(sequence - 2)")
            #expect(
                (since.json["items"] as? [[String: Any]])?.compactMap { $0["workingID"] as? String } == [
                    "acme-12", "acme-11",
                ]
            )
            for bad in ["limit=0", "limit=101", "limit=ten", "since=-1"] {
                let reply = try await broker.send(.GET, "/CurrentImpulse?\(bad)")
                #expect(reply.status == 400, "\(bad)")
                #expect(reply.headers["content-type"].first == "application/problem+json")
            }
        }
    }

    @Test("HTTP/1.1 over TLS serves the same API", arguments: TestDatabase.allCases)
    func http11(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, http1Only: true) { broker in
            let reply = try await broker.send(.GET, "/CurrentImpulse")
            #expect(reply.status == 200)
            #expect(reply.version == .http1_1)
            #expect((reply.json["items"] as? [Any])?.count == 10)
        }
    }

    @Test("The optional plain HTTP/1.1 listener serves the API for a proxy in front", arguments: TestDatabase.allCases)
    func plainListener(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, plain: true) { broker in
            let reply = try await broker.send(.GET, "/CurrentImpulse?limit=1", plain: true)
            #expect(reply.status == 200)
            let item = try #require((reply.json["items"] as? [[String: Any]])?.first)
            #expect((item["imageURLs"] as? [String])?.first?.hasPrefix("http://127.0.0.1:") == true)
        }
    }

    @Test(
        "HEAD answers GET's headers without a body; ETag and Last-Modified give 304",
        arguments: TestDatabase.allCases
    )
    func conditionalRequests(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let get = try await broker.send(.GET, "/CurrentImpulse")
            let etag = try #require(get.headers["etag"].first)
            let lastModified = try #require(get.headers["last-modified"].first)
            let head = try await broker.send(.HEAD, "/CurrentImpulse")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head.headers["etag"].first == etag)
            let matched = try await broker.send(.GET, "/CurrentImpulse", headers: [("If-None-Match", etag)])
            #expect(matched.status == 304)
            #expect(matched.body.isEmpty)
            let unmatched = try await broker.send(.GET, "/CurrentImpulse", headers: [("If-None-Match", "\"other\"")])
            #expect(unmatched.status == 200)
            let since = try await broker.send(.GET, "/CurrentImpulse", headers: [("If-Modified-Since", lastModified)])
            #expect(since.status == 304)
            let earlier = try await broker.send(
                .GET,
                "/CurrentImpulse",
                headers: [("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")]
            )
            #expect(earlier.status == 200)
        }
    }

    @Test("Accept: application/x-plist gets a property list with the same items", arguments: TestDatabase.allCases)
    func propertyList(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let reply = try await broker.send(
                .GET,
                "/CurrentImpulse?limit=2",
                headers: [("Accept", "application/x-plist")]
            )
            #expect(reply.status == 200)
            #expect(reply.headers["content-type"].first == "application/x-plist")
            let plist = try PropertyListSerialization.propertyList(from: reply.body, format: nil) as? [String: Any]
            let items = try #require(plist?["items"] as? [[String: Any]])
            #expect(items.map { $0["workingID"] as? String } == ["acme-12", "acme-11"])
            #expect(items.first?["single"] as? Bool == true)
            #expect(items.first?["videoURL"] == nil)
            let json = try await broker.send(
                .GET,
                "/CurrentImpulse?limit=2",
                headers: [("Accept", "application/json, application/x-plist;q=0.5")]
            )
            #expect(json.headers["content-type"].first == "application/json; charset=utf-8")
        }
    }

    @Test("RegisterToken stores the token; a second user's registration moves it", arguments: TestDatabase.allCases)
    func registerTokenMoves(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let token = String(repeating: "ab", count: 32)
            let body = #"{"DeviceToken": "\#(token.uppercased())", "DeviceName": "Alice's iPhone"}"#
            let first = try await broker.send(.POST, "/RegisterToken", body: body)
            #expect(first.status == 204)
            #expect(first.body.isEmpty)
            var alice = try await broker.send(.GET, "/v1/devices")
            #expect((alice.json["devices"] as? [[String: Any]])?.first?["token"] as? String == token)
            let moved = try await broker.send(
                .POST,
                "/RegisterToken",
                user: "bob",
                body: body.replacingOccurrences(of: "Alice", with: "Bob")
            )
            #expect(moved.status == 204)
            alice = try await broker.send(.GET, "/v1/devices")
            #expect((alice.json["devices"] as? [Any])?.isEmpty == true)
            let bob = try await broker.send(.GET, "/v1/devices", user: "bob")
            #expect((bob.json["devices"] as? [[String: Any]])?.first?["name"] as? String == "Bob's iPhone")
            // The store agrees: exactly one owner.
            let device = try await broker.store.device(
                tenant: Fixture.acme,
                topic: "com.acme.impulse",
                token: try DeviceToken(token)
            )
            let bobUser = try await broker.store.user(tenant: Fixture.acme, username: "bob")
            #expect(device?.owner == bobUser?.id)
        }
    }

    @Test(
        "Bad RegisterToken bodies get their status and a problem, and write nothing",
        arguments: [
            (#"{"DeviceToken": "abcd"#, 400, "malformed-body"),
            (#"{"DeviceToken": 12, "DeviceName": "x"}"#, 400, "malformed-body"),
            (#"{"DeviceName": "x"}"#, 400, "malformed-body"),
            (#"[1, 2]"#, 400, "malformed-body"),
            (#"{"DeviceToken": "abc", "DeviceName": "x"}"#, 422, "invalid-input"),
            (#"{"DeviceToken": "zz00112233445566778899aabbccddeeff", "DeviceName": "x"}"#, 422, "invalid-input"),
            (#"{"DeviceToken": "", "DeviceName": "x"}"#, 422, "invalid-input"),
        ]
    )
    func registerTokenBadInput(body: String, status: Int, code: String) async throws {
        try await TestBroker.run { broker in
            let reply = try await broker.send(.POST, "/RegisterToken", body: body)
            #expect(reply.status == status)
            #expect(reply.headers["content-type"].first == "application/problem+json")
            #expect(reply.json["type"] as? String == "urn:impulse-broker:problem:\(code)")
            #expect(reply.json["status"] as? Int == status)
            #expect((reply.json["detail"] as? String)?.isEmpty == false)
            let devices = try await broker.send(.GET, "/v1/devices")
            #expect((devices.json["devices"] as? [Any])?.isEmpty == true)
        }
    }

    @Test(
        "Oversized bodies get 413 and a non-JSON content type 415; nothing is written",
        arguments: TestDatabase.allCases
    )
    func bodyLimits(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, maxBodySize: 1024) { broker in
            let token = String(repeating: "cd", count: 32)
            let huge = #"{"DeviceToken": "\#(token)", "DeviceName": "\#(String(repeating: "x", count: 4096))"}"#
            let tooLarge = try await broker.send(.POST, "/RegisterToken", body: huge)
            #expect(tooLarge.version == .http2)  // refused by the libnghttp2 engine before the body is buffered
            #expect(tooLarge.status == 413)
            #expect(tooLarge.headers["content-type"].first == "application/problem+json")
            #expect(tooLarge.text.contains("body-too-large"), "\(tooLarge.text)")
            let wrongType = try await broker.send(
                .POST,
                "/RegisterToken",
                headers: [("Content-Type", "application/xml")],
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "x"}"#
            )
            #expect(wrongType.status == 415)
            let devices = try await broker.send(.GET, "/v1/devices")
            #expect((devices.json["devices"] as? [Any])?.isEmpty == true)
        }
    }

    @Test(
        "RegisterToken reads JSON however it is labelled (as the first app and curl -d send it) and form fields",
        arguments: TestDatabase.allCases
    )
    func registerTokenLabels(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let cases: [(label: String?, body: String)] = [
                (
                    "application/x-www-form-urlencoded",
                    #"{"DeviceToken": "\#(String(repeating: "a1", count: 32))", "DeviceName": "curl -d"}"#
                ),
                (
                    "text/plain; charset=utf-8",
                    #"{"DeviceToken": "\#(String(repeating: "a2", count: 32))", "DeviceName": "text"}"#
                ),
                (nil, #" {"DeviceToken": "\#(String(repeating: "a3", count: 32))", "DeviceName": "unlabelled"}"#),
                (
                    "application/x-www-form-urlencoded",
                    "DeviceToken=\(String(repeating: "a4", count: 32))&DeviceName=My%20iPhone"
                ),
            ]
            for (label, body) in cases {
                let answer = try await broker.send(
                    .POST,
                    "/RegisterToken",
                    headers: label.map { [("Content-Type", $0)] } ?? [],
                    body: body
                )
                #expect(answer.status == 204, "\(label ?? "none"): \(answer.status) \(answer.text)")
            }
            let names = (try await broker.send(.GET, "/v1/devices").json["devices"] as? [[String: Any]] ?? [])
                .compactMap { $0["name"] as? String }
            #expect(Set(names) == ["curl -d", "text", "unlabelled", "My iPhone"], "\(names)")
            // Form fields that are not the route's are a 400, not a crash.
            let bad = try await broker.send(
                .POST,
                "/RegisterToken",
                headers: [("Content-Type", "application/x-www-form-urlencoded")],
                body: "Device=1"
            )
            #expect(bad.status == 400, "\(bad.text)")
        }
    }
}
