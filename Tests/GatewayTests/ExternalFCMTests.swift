import AsyncHTTPClient
import Foundation
import Gateway
import NIOCore
import NIOHTTP1
import NIOSSL
import TestSupport
import Testing
import _CryptoExtras

@Suite("broker serve against an external FCM", .timeLimit(.minutes(3)))
struct ExternalFCMTests {
    @Test("serve with a service account key pushes an Android phone's impulse to a separate fcm-simulator process")
    func externalSimulator() async throws {
        let data = TestBroker.temporaryDirectory()
        // A key file as Google's console writes it (its token_uri is Google's: mode external exchanges at the
        // simulator's /token instead).
        let account = FCMServiceAccount(
            projectID: "acme-wellbeing",
            clientEmail: "broker@acme-wellbeing.iam.gserviceaccount.com",
            privateKeyID: "0123abcd",
            key: try _RSA.Signing.PrivateKey(keySize: .bits2048)
        )
        try account.json().write(to: URL(fileURLWithPath: data + "/service-account.json"))
        let simulator = try RunningBroker([
            "fcm-simulator", "--listen", "127.0.0.1:0", "--data-dir", data + "/sim", "--fcm-account",
            data + "/service-account.json", "--log-level", "error",
        ])
        let simulatorPort = try #require(
            try await simulator.port(matching: #/https://127\.0\.0\.1:(\d+)/token/#),
            "\(simulator.output)"
        )
        #expect(simulator.output.contains("1 service account(s)"))
        let environment = [
            "BROKER_FCM_MODE": "external", "BROKER_FCM_ENDPOINT": "127.0.0.1:\(simulatorPort)",
            "BROKER_FCM_SERVER_HOSTNAME": "localhost", "BROKER_FCM_TRUST_ROOTS": "\(data)/sim/tls/self-signed.crt",
            "BROKER_FCM_SERVICE_ACCOUNT": "\(data)/service-account.json",
        ]
        let config = """
            {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "defaultTenant": "acme", "logLevel": "notice"}
            """
        try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
        let admin = ["--config", data + "/broker.json"]
        try await ExternalAPNsTests.seed(admin: admin, data: data)
        let broker = try RunningBroker(["serve"] + admin, environment: environment)
        let port = try #require(try await broker.port(matching: /listener=https port=(\d+)/), "\(broker.output)")

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(data + "/broker/tls/self-signed.crt")
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        func call(
            _ method: HTTPMethod,
            _ path: String,
            _ user: String,
            _ password: String,
            _ body: String,
            form: Bool = false
        )
            async throws -> Int
        {
            var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)\(path)")
            request.method = method
            request.headers.add(
                name: "Authorization",
                value: "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            )
            request.headers.add(
                name: "Content-Type",
                value: form ? "application/x-www-form-urlencoded" : "application/json"
            )
            request.body = .bytes(ByteBuffer(string: body))
            return Int(try await client.execute(request, timeout: .seconds(10)).status.code)
        }
        let token = "fcm-device:APA91b" + String(repeating: "Zz9-", count: 30)
        #expect(
            try await call(.PUT, "/v1/devices/\(token)", "alice", "a", #"{"name": "Pixel", "platform": "fcm"}"#) == 201
        )
        var pageRequest = HTTPClientRequest(url: "https://127.0.0.1:\(port)/SendPush")
        pageRequest.headers.add(name: "Authorization", value: "Basic " + Data("ops:o".utf8).base64EncodedString())
        let page = try await client.execute(pageRequest, timeout: .seconds(10)).body.collect(upTo: 1 << 20)
        let csrf = try #require(TestBroker.csrfToken(in: String(buffer: page)))
        #expect(
            try await call(
                .POST,
                "/SendPush",
                "ops",
                "o",
                "command=send&impulse=w1&target=alice&csrf=\(csrf)",
                form: true
            ) == 200
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
                    HTTP2Header(":path", "/_simulator/fcm/accepted"), HTTP2Header(":authority", "localhost"),
                    RunningBroker.controlAuthorization,
                ],
                deadline: .seconds(5)
            )
            let json = try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
            let messages = json?["messages"] as? [[String: Any]]
            return messages?.first?["token"] as? String == token && messages?.first?["title"] as? String == "Breathe"
                && messages?.first?["project"] as? String == "acme-wellbeing" && json?["tokensIssued"] as? Int == 1
        }
        #expect(accepted, "\(broker.output)")
        await control.close()
        #expect(await broker.stop() == 0)
        #expect(await simulator.stop() == 0)
        #expect(!broker.output.contains(token))
        #expect(!broker.output.contains("PRIVATE KEY"))
    }
}
