import AsyncHTTPClient
import Foundation
import NIOHTTP1
import TestSupport
import Testing

@Suite("Small holes found by an attacker", .timeLimit(.minutes(2)))
struct SmallDefectTests {
    /// Runs `openssl s_client` for one TLS 1.2 handshake with one cipher suite; returns whether it completed.
    static func handshake(port: Int, cipher: String) async throws -> (Bool, String) {
        try await offThePool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = [
                "s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2", "-cipher", cipher, "-alpn", "h2",
            ]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus == 0 && text.contains("Cipher is \(cipher)"), text)
        }
    }

    @Test("TLS 1.2 offers AEAD suites only: CBC suites are refused, GCM ones negotiate h2")
    func aeadOnly() async throws {
        try await TestBroker.run { broker in
            for cbc in ["ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA"] {
                let (done, output) = try await Self.handshake(port: broker.httpsPort, cipher: cbc)
                #expect(!done, "\(output.suffix(600))")
            }
            let (done, output) = try await Self.handshake(
                port: broker.httpsPort,
                cipher: "ECDHE-ECDSA-AES128-GCM-SHA256"
            )
            #expect(done, "\(output.suffix(600))")
            #expect(output.contains("ALPN protocol: h2"))
        }
    }

    @Test("A control character in DeviceName is refused with 422 and nothing is stored")
    func controlCharactersInNames() async throws {
        try await TestBroker.run { broker in
            let token = String(repeating: "5a", count: 32)
            for name in ["bad\\u0000name", "tab\\there", "bell\\u0007"] {
                let reply = try await broker.send(
                    .POST,
                    "/RegisterToken",
                    headers: [("Content-Type", "application/json")],
                    body: #"{"DeviceToken": "\#(token)", "DeviceName": "\#(name)"}"#
                )
                #expect(reply.status == 422, "\(name): \(reply.status) \(reply.text)")
                #expect(reply.text.contains("control characters"))
            }
            let devices = try await broker.send(.GET, "/v1/devices").json["devices"] as? [[String: Any]]
            #expect(devices?.isEmpty == true)
            let fine = try await broker.send(
                .POST,
                "/RegisterToken",
                headers: [("Content-Type", "application/json")],
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "Zoë's iPhone ✓"}"#
            )
            #expect(fine.status == 204)
        }
    }

    @Test("Methods a route does not take get 405 with Allow (TRACE too); /health says its charset")
    func methodsAndHealth() async throws {
        try await TestBroker.run { broker in
            for (method, path, allow) in [
                (HTTPMethod.DELETE, "/health", "GET, HEAD"), (.POST, "/health", "GET, HEAD"),
                (.POST, "/media/hello.txt", "GET, HEAD"), (.TRACE, "/v1/me", "GET, HEAD, OPTIONS"),
                (.TRACE, "/CurrentImpulse", "GET, HEAD, OPTIONS"), (.TRACE, "/media/hello.txt", "GET, HEAD"),
                (.TRACE, "/health", "GET, HEAD"), (.RAW(value: "QUERY"), "/v1/me", "GET, HEAD, OPTIONS"),
                (.RAW(value: "BREW"), "/t/acme/v1/devices/abcd", "DELETE, OPTIONS, PUT"),
                (.PUT, "/t/acme/admin/v1/users/bob", "DELETE, GET, HEAD, OPTIONS, PATCH"),
                (.RAW(value: "QUERY"), "/media/x/y.txt", "GET, HEAD"),
            ] {
                let answer = try await broker.send(method, path)
                #expect(answer.status == 405, "\(method) \(path): \(answer.status)")
                #expect(answer.headers["Allow"].first == allow, "\(method) \(path)")
                #expect(answer.headers["Content-Type"].first == "application/problem+json", "\(method) \(path)")
            }
            let health = try await broker.send(.GET, "/health", user: nil)
            #expect(health.status == 200 && health.text == #"{"status":"ok"}"#)
            #expect(health.headers["Content-Type"].first == "application/json; charset=utf-8")
        }
    }

    @Test("A new reminder's Location answers GET and HEAD while it is pending, 404 once cancelled")
    func reminderLocation() async throws {
        try await TestBroker.run { broker in
            let created = try await broker.remind("acme-3", in: 3600)
            #expect(created.status == 201)
            let location = try #require(created.headers.first(name: "Location"))
            let shown = try await broker.send(.GET, location)
            #expect(shown.status == 200, "\(shown.text)")
            #expect(shown.json["id"] as? Int == created.json["id"] as? Int)
            #expect(shown.json["workingID"] as? String == "acme-3")
            #expect(try await broker.send(.HEAD, location).status == 200)
            // Another user does not see it.
            #expect(try await broker.send(.GET, location, user: "bob").status == 404)
            #expect(try await broker.send(.DELETE, location).status == 204)
            #expect(try await broker.send(.GET, location).status == 404)
        }
    }

    @Test("The operator listener takes the bearer scheme in any case")
    func bearerSchemeCase() async throws {
        try await TestBroker.run(adminToken: "operator-secret") { broker in
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            var statuses: [Int] = []
            for authorization in [
                "Bearer operator-secret", "bearer operator-secret", "BEARER  operator-secret",
                "bearer operator-secreT", "Basic b3BlcmF0b3Itc2VjcmV0", nil,
            ] {
                var request = HTTPClientRequest(url: "http://127.0.0.1:\(broker.adminPort ?? 0)/inspect")
                if let authorization { request.headers.add(name: "Authorization", value: authorization) }
                statuses.append(Int(try await client.execute(request, timeout: .seconds(10)).status.code))
            }
            try await client.shutdown()
            #expect(statuses == [200, 200, 200, 401, 401, 401])
        }
    }
}

@Suite("HTTP/1.1 requests the parser refuses", .timeLimit(.minutes(3)))
struct ParserErrorTests {
    @Test("An unknown method gets a 400 problem body and the connection closes, over TLS and on the plain listener")
    func unknownMethod() async throws {
        try await TestBroker.run(plain: true) { broker in
            // The plain listener, byte for byte.
            let raw = try await RawHTTP2Client.connect(port: broker.plainPort ?? 0, preface: false, tls: false)
            try await raw.send(Array("FOO /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
            #expect(try await raw.wait { _ in raw.isClosed })
            let answer = String(decoding: raw.receivedBytes, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(answer)")
            #expect(answer.lowercased().contains("content-type: application/problem+json"), "\(answer)")
            #expect(answer.contains(#""type":"urn:impulse-broker:problem:malformed-request""#), "\(answer)")
            // TLS with ALPN http/1.1, as curl sends it.
            let output = try await curl([
                "-sk", "--http1.1", "-X", "FOO", "-w", "\n%{http_code}", "https://127.0.0.1:\(broker.httpsPort)/health",
            ])
            #expect(output.hasSuffix("\n400"), "\(output)")
            #expect(output.contains("malformed-request"), "\(output)")
            // The listener is fine afterwards.
            #expect(try await broker.send(.GET, "/health", user: nil, plain: true).status == 200)
        }
    }
}
