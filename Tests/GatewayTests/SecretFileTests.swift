import AsyncHTTPClient
import Engine
import Foundation
import HummingbirdBcrypt
import TestSupport
import Testing

/// Every secret setting has a `_FILE` form (issue 44: the admin token had none, so a kit could only pass it in the
/// environment or rely on a NetworkPolicy alone): the admin token guards `/metrics` and `/inspect`, never the probes.
@Suite("Secrets from files", .timeLimit(.minutes(2)))
struct SecretFileTests {
    @Test(
        "BROKER_ADMIN_TOKEN_FILE: /metrics and /inspect need its token, the probes do not; a missing file stops the start"
    )
    func adminTokenFile() async throws {
        let data = TestBroker.temporaryDirectory()
        try "admin-token-from-a-file-0123456789\n".write(
            toFile: data + "/admin-token",
            atomically: true,
            encoding: .utf8
        )
        let config = """
            {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0",
             "logLevel": "notice", "scheduler": false}
            """
        try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
        let broker = try RunningBroker(
            ["serve", "--config", data + "/broker.json"],
            environment: ["BROKER_ADMIN_TOKEN_FILE": data + "/admin-token"]
        )
        defer { broker.terminate() }
        let port = try #require(try await broker.port(matching: /listener=admin port=(\d+)/), "\(broker.output)")
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        func status(_ path: String, token: String?) async throws -> Int {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 4 << 20)
            return Int(response.status.code)
        }
        #expect(try await status("/metrics", token: nil) == 401)
        #expect(try await status("/inspect", token: "admin-token-from-a-file-012345678") == 401)
        #expect(try await status("/metrics", token: "admin-token-from-a-file-0123456789") == 200)
        #expect(try await status("/inspect", token: "admin-token-from-a-file-0123456789") == 200)
        #expect(try await status("/health/live", token: nil) == 200)
        #expect(try await status("/health", token: nil) == 200)
        try await client.shutdown()
        #expect(await broker.stop() == 0)

        let missing = try await BrokerProcess.run(
            ["serve", "--config", data + "/broker.json"],
            dataDirectory: nil,
            environment: ["BROKER_ADMIN_TOKEN_FILE": data + "/no-such-file"]
        )
        #expect(missing.status != 0)
        #expect((missing.output + missing.error).contains("admin token"), "\(missing.error)")
    }

    @Test("BROKER_PASSWORD_FILE gives user add its password")
    func passwordFile() async throws {
        let data = TestBroker.temporaryDirectory()
        #expect(
            try await BrokerProcess.run(["tenant", "create", "acme", "--name", "Acme"], dataDirectory: data).status == 0
        )
        try "from-a-file\n".write(toFile: data + "/password", atomically: true, encoding: .utf8)
        let added = try await BrokerProcess.run(
            ["user", "add", "acme", "anna"],
            dataDirectory: data,
            environment: ["BROKER_PASSWORD_FILE": data + "/password"]
        )
        #expect(added.status == 0, "\(added.error)")
        let store = try await SQLiteStore(
            configuration: .init(path: data + "/broker.sqlite"),
            logger: TestBroker.logger
        )
        let anna = try #require(try await store.user(tenant: try TenantID("acme"), username: "anna"))
        #expect(Bcrypt.verify("from-a-file", hash: anna.passwordHash))
        await store.close()
    }
}
