import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import TestSupport
import Testing

@Suite("Authentication", .timeLimit(.minutes(2)))
struct AuthTests {
    @Test("Missing, malformed and wrong credentials get 401 with a realm; a disabled user gets 403")
    func failures() async throws {
        try await TestBroker.run { broker in
            let cases: [(String?, String?, [(String, String)])] = [
                (nil, nil, []),
                ("alice", "wrong", []),
                ("nobody", "whatever", []),
                (nil, nil, [("Authorization", "Basic !!!not-base64")]),
                (nil, nil, [("Authorization", "Bearer abc")]),
                (nil, nil, [("Authorization", "Basic " + Data("no-colon".utf8).base64EncodedString())]),
            ]
            for (user, password, headers) in cases {
                let reply = try await broker.send(
                    .GET,
                    "/CurrentImpulse",
                    user: user,
                    password: password,
                    headers: headers
                )
                #expect(reply.status == 401)
                #expect(reply.headers["www-authenticate"].first?.hasPrefix("Basic realm=") == true)
                #expect(reply.json["type"] as? String == "urn:impulse-broker:problem:unauthorized")
            }
            let disabled = try await broker.send(.GET, "/CurrentImpulse", user: "carol")
            #expect(disabled.status == 403)
            #expect(disabled.json["type"] as? String == "urn:impulse-broker:problem:account-disabled")
        }
    }

    @Test("Credentials with %, &, : and non-ASCII characters work, in the username too")
    func specialCharacters() async throws {
        try await TestBroker.run { broker in
            // Alice's password is "pä:ss%&wörd ✓".
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
            try await Fixture.addUser(broker.store, Fixture.acme, "jörg&%ü", "a:b:c")
            let reply = try await broker.send(.GET, "/v1/me", user: "jörg&%ü", password: "a:b:c")
            #expect(reply.status == 200)
            #expect(reply.json["username"] as? String == "jörg&%ü")
        }
    }

    @Test("A password change or a disable by the admin command takes effect despite the credential cache")
    func revocation() async throws {
        try await TestBroker.run { broker in
            #expect(try await broker.send(.GET, "/v1/me", user: "bob").status == 200)
            #expect(try await broker.send(.GET, "/v1/me", user: "bob").status == 200)  // now cached
            // The admin command writes the store through its own connection, as another process does;
            // the change feed carries the change to the server's credential cache.
            let admin = try await SQLiteStore(
                configuration: .init(path: broker.directory + "/broker.sqlite"),
                logger: TestBroker.logger
            )
            let newHash = try await Authenticator.hash("new-pass", cost: 4)
            #expect(try await admin.setPassword(tenant: Fixture.acme, username: "bob", passwordHash: newHash))
            #expect(try await eventually { try await broker.send(.GET, "/v1/me", user: "bob").status == 401 })
            #expect(try await broker.send(.GET, "/v1/me", user: "bob", password: "new-pass").status == 200)
            #expect(try await admin.setEnabled(tenant: Fixture.acme, username: "bob", enabled: false))
            #expect(
                try await eventually {
                    try await broker.send(.GET, "/v1/me", user: "bob", password: "new-pass").status == 403
                }
            )
        }
    }
}

@Suite("Transport limits", .timeLimit(.minutes(2)))
struct TransportLimitTests {
    @Test("A header list over 16 KiB is refused before it reaches a route, on HTTP/1.1 and HTTP/2")
    func headerLimit() async throws {
        let big = [("X-Padding", String(repeating: "x", count: 20_000))]
        try await TestBroker.run(http1Only: true) { broker in
            // HTTP/1.1 answers 400 and closes; a client may see only the close.
            let status = try? await broker.send(.GET, "/v1/me", headers: big, timeout: .seconds(2)).status
            #expect(status == nil || status == 400)
            let served = try await Self.freshRequestSucceeds(broker)
            #expect(served)
        }
        try await TestBroker.run { broker in
            // async-http-client does not get such a header block out; curl does. HTTP/2 (libnghttp2) answers
            // 431 with a problem body.
            let output = try await curl([
                "-sk", "--http2", "-w", "\n%{http_version} %{http_code}", "-H", "X-Padding: " + big[0].1,
                "https://127.0.0.1:\(broker.httpsPort)/v1/me",
            ])
            #expect(output.hasSuffix("\n2 431"), "\(output)")
            #expect(output.contains("headers-too-large"), "\(output)")
            let status = try? await broker.send(.GET, "/v1/me", headers: big, timeout: .seconds(2)).status
            #expect(status != 200)
            let served = try await Self.freshRequestSucceeds(broker)
            #expect(served)
        }
    }

    /// A new client (the old one's connection may be gone) still gets served.
    static func freshRequestSucceeds(_ broker: TestBroker) async throws -> Bool {
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: broker.clientConfiguration)
        var request = HTTPClientRequest(url: "https://127.0.0.1:\(broker.httpsPort)/health")
        request.method = .GET
        // A deadline for a machine the whole suite loads (a full run once took over 10 s here), not a requirement.
        let status = try? await client.execute(request, timeout: .seconds(60)).status.code
        try await client.shutdown()
        return status == 200
    }
}

@Suite("Tenants", .timeLimit(.minutes(2)))
struct TenantTests {
    @Test("The same username in two tenants is two users, and nothing crosses between them")
    func isolation() async throws {
        try await TestBroker.run { broker in
            let globex = try await broker.send(.GET, "/t/globex/CurrentImpulse", password: Fixture.globexAlicePassword)
            #expect(globex.status == 200)
            #expect((globex.json["items"] as? [[String: Any]])?.map { $0["workingID"] as? String } == ["secret-1"])
            // Acme's alice password does not open Globex's alice, and the reverse.
            #expect(try await broker.send(.GET, "/t/globex/CurrentImpulse").status == 401)
            #expect(
                try await broker.send(.GET, "/t/acme/CurrentImpulse", password: Fixture.globexAlicePassword).status
                    == 401
            )
            // Globex's impulse is invisible to acme's alice, by id too.
            #expect(try await broker.send(.GET, "/t/acme/v1/impulses/secret-1").status == 404)
            let acme = try await broker.send(.GET, "/t/acme/CurrentImpulse?limit=100")
            #expect(
                (acme.json["items"] as? [[String: Any]])?.contains { $0["workingID"] as? String == "secret-1" } == false
            )
            // A token registered in both tenants has an owner in each: tenants are separate registries.
            let token = String(repeating: "0f", count: 32)
            let body = #"{"DeviceToken": "\#(token)", "DeviceName": "shared"}"#
            #expect(try await broker.send(.POST, "/t/acme/RegisterToken", body: body).status == 204)
            #expect(
                try await broker.send(
                    .POST,
                    "/t/globex/RegisterToken",
                    password: Fixture.globexAlicePassword,
                    body: body
                ).status == 204
            )
            let acmeDevices = try await broker.send(.GET, "/t/acme/v1/devices")
            #expect((acmeDevices.json["devices"] as? [Any])?.count == 1)
        }
    }

    @Test("Unknown tenants get 404 before any credential check")
    func unknownTenant() async throws {
        try await TestBroker.run { broker in
            for path in ["/t/nope/CurrentImpulse", "/t/NOT_VALID/CurrentImpulse", "/t/nope/v1/me"] {
                let reply = try await broker.send(.GET, path, user: nil)
                #expect(reply.status == 404, "\(path)")
                #expect(reply.json["type"] as? String == "urn:impulse-broker:problem:unknown-tenant")
            }
        }
    }

    @Test("Unknown paths get 404, wrong methods 405 with Allow, OPTIONS lists the methods")
    func routing() async throws {
        try await TestBroker.run { broker in
            let missing = try await broker.send(.GET, "/NoSuchThing")
            #expect(missing.status == 404)
            #expect(missing.headers["content-type"].first == "application/problem+json")
            let wrong = try await broker.send(.PUT, "/CurrentImpulse", body: "{}")
            #expect(wrong.status == 405)
            #expect(wrong.headers["allow"].first == "GET, HEAD, OPTIONS")
            let wrongDevice = try await broker.send(.POST, "/v1/devices/abcd", body: "{}")
            #expect(wrongDevice.status == 405)
            #expect(wrongDevice.headers["allow"].first == "DELETE, OPTIONS, PUT")
            let health = try await broker.send(.GET, "/health", user: nil)
            #expect(health.status == 200 && health.json["status"] as? String == "ok")
            let options = try await broker.send(.OPTIONS, "/RegisterToken", user: nil)
            #expect(options.status == 204)
            #expect(options.headers["allow"].first == "OPTIONS, POST")
        }
    }
}

/// Runs curl to completion and returns what it printed.
func curl(_ arguments: [String]) async throws -> String {
    try await offThePool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return output
    }
}
