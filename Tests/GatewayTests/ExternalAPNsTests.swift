import AsyncHTTPClient
import Crypto
import Foundation
import Gateway
import NIOCore
import NIOSSL
import TestSupport
import Testing

@Suite("broker serve against an external APNs", .timeLimit(.minutes(3)))
struct ExternalAPNsTests {
    @Test(
        "serve configured with a .p8 key pushes to a separate apns-simulator process and records the outcome",
        arguments: ["configuration file", "environment"]
    )
    func externalSimulator(_ source: String) async throws {
        let data = TestBroker.temporaryDirectory()
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: data + "/AuthKey.p8", atomically: true, encoding: .utf8)
        let simulator = try RunningBroker([
            "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data + "/sim", "--key",
            "KEY0000001=\(data)/AuthKey.p8",
            "--topic", "com.acme.impulse", "--log-level", "error",
        ])
        let simulatorPort = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#))
        let apns = """
            "apns": {"mode": "external", "production": "127.0.0.1:\(simulatorPort)", "serverHostname": "localhost",
                     "trustRoots": "\(data)/sim/tls/self-signed.crt",
                     "credential": {"teamID": "TEAM000001", "keyID": "KEY0000001", "keyFile": "\(data)/AuthKey.p8"}},
            """
        // A container gets the same settings as environment variables (the key file mounted as a secret).
        let environment =
            source == "environment"
            ? [
                "BROKER_APNS_MODE": "external", "BROKER_APNS_PRODUCTION": "127.0.0.1:\(simulatorPort)",
                "BROKER_APNS_SERVER_HOSTNAME": "localhost",
                "BROKER_APNS_TRUST_ROOTS": "\(data)/sim/tls/self-signed.crt",
                "BROKER_APNS_TEAM_ID": "TEAM000001", "BROKER_APNS_KEY_ID": "KEY0000001",
                "BROKER_APNS_KEY_FILE": "\(data)/AuthKey.p8",
            ] : [:]
        let config = """
            {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0",
             \(source == "environment" ? "" : apns)
             "defaultTenant": "acme", "logLevel": "notice"}
            """
        try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
        let admin = ["--config", data + "/broker.json"]
        try await Self.seed(admin: admin, data: data)
        let broker = try RunningBroker(["serve"] + admin, environment: environment)
        let port = try #require(try await broker.port(matching: /listener=https port=(\d+)/), "\(broker.output)")

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(data + "/broker/tls/self-signed.crt")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        func post(
            _ path: String,
            _ user: String,
            _ password: String,
            _ body: String,
            form: Bool = false
        ) async throws -> Int {
            var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)\(path)")
            request.method = .POST
            request.headers.add(
                name: "Authorization",
                value: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            )
            if form { request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded") }
            request.body = .bytes(ByteBuffer(string: body))
            return Int(try await client.execute(request, timeout: .seconds(10)).status.code)
        }
        let token = String(repeating: "4e", count: 32)
        #expect(
            try await post("/RegisterToken", "alice", "a", #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#)
                == 204
        )
        var pageRequest = HTTPClientRequest(url: "https://127.0.0.1:\(port)/SendPush")
        pageRequest.headers.add(name: "Authorization", value: "Basic " + Data("ops:o".utf8).base64EncodedString())
        let page = try await client.execute(pageRequest, timeout: .seconds(10)).body.collect(upTo: 1 << 20)
        let csrf = try #require(TestBroker.csrfToken(in: String(buffer: page)))
        #expect(
            try await post("/SendPush", "ops", "o", "command=send&impulse=w1&target=alice&csrf=\(csrf)", form: true)
                == 200
        )
        try await client.shutdown()

        var simulatorTLS = TLSConfiguration.makeClientConfiguration()
        simulatorTLS.trustRoots = .file(data + "/sim/tls/self-signed.crt")
        let control = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: simulatorPort,
            tls: simulatorTLS,
            serverHostname: "localhost"
        )
        let accepted = try await eventually {
            let listing = try await control.send(
                [
                    HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "https"),
                    HTTP2Header(":path", "/_simulator/accepted"), HTTP2Header(":authority", "localhost"),
                    RunningBroker.controlAuthorization,
                ],
                deadline: .seconds(5)
            )
            let json = try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
            let pushes = json?["pushes"] as? [[String: Any]]
            return pushes?.first?["token"] as? String == token
                && pushes?.first?["topic"] as? String == "com.acme.impulse"
        }
        #expect(accepted, "\(broker.output)")
        await control.close()
        #expect(await broker.stop() == 0)
        #expect(await simulator.stop() == 0)
        #expect(!broker.output.contains(token))
    }

    /// Through the broker's own commands: tenant `acme` (topic `com.acme.impulse`), `alice` (password `a`), the admin
    /// `ops` (`o`), and a catalog of one impulse, `w1`, titled "Breathe".
    static func seed(admin: [String], data: String) async throws {
        for command in [
            ["tenant", "create", "acme", "--apns-topic", "com.acme.impulse"],
            ["user", "add", "acme", "alice", "--password", "a"],
            ["user", "add", "acme", "ops", "--password", "o", "--admin"],
        ] {
            try #require(try await BrokerProcess.run(command + admin, dataDirectory: nil).status == 0)
        }
        let catalog = data + "/catalog.json"
        try
            #"{"items": [{"workingID": "w1", "language": "EN", "title": "Breathe", "descriptionShort": "S", "description": "D", "duration": 2, "action": "do", "single": true, "lifeArea": "health"}]}"#
            .write(toFile: catalog, atomically: true, encoding: .utf8)
        try #require(
            try await BrokerProcess.run(["catalog", "import", "acme", catalog] + admin, dataDirectory: nil).status == 0
        )
    }
}
