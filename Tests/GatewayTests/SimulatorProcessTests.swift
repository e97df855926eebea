import Crypto
import Engine
import Foundation
import Gateway
import NIOCore
import NIOSSL
import Testing

@Suite("The broker apns-simulator process", .timeLimit(.minutes(3)))
struct SimulatorProcessTests {
    @Test("It verifies provider tokens, records pushes, and obeys its control API over TLS and HTTP/2")
    func process() async throws {
        let data = TestBroker.temporaryDirectory()
        let identity = APNsSigningIdentity(teamID: "TEAM000001", keyID: "KEY0000001", key: P256.Signing.PrivateKey())
        try identity.publicKey.pemRepresentation.write(toFile: data + "/key.pem", atomically: true, encoding: .utf8)
        let simulator = try RunningBroker([
            "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data, "--key",
            "\(identity.keyID)=\(data)/key.pem",
            "--topic", "com.acme.impulse", "--log-level", "error",
        ])
        let port = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#))
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(data + "/tls/self-signed.crt")
        let client = HTTP2PushClient(
            configuration: HTTP2PushClientConfiguration(
                host: "127.0.0.1",
                port: port,
                tls: tls,
                serverHostname: "localhost",
                // A 503 is sent again at the pool's next attempts for this long, then answered.
                unreachableWait: .seconds(2)
            ),
            authentication: .token(ProviderTokenCache(identity: identity)),
            logger: TestBroker.logger
        )
        let payload = try ImpulsePayload(title: "Hello", badge: 1, impulseID: "x").encoded()
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let notification = try APNsNotification(token: token, topic: "com.acme.impulse", payload: payload)
        #expect(await client.send(notification) == .accepted(apnsID: notification.apnsID))
        let control = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port,
            tls: tls,
            serverHostname: "localhost"
        )
        func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> HTTP2Message {
            try await control.send(
                [
                    HTTP2Header(":method", method), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                    HTTP2Header(":authority", "localhost"), RunningBroker.controlAuthorization,
                ],
                body: body.map { ByteBuffer(string: $0) },
                deadline: .seconds(5)
            )
        }
        let listing = try await call("GET", "/_simulator/accepted")
        let json = try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
        #expect(json?["accepted"] as? Int == 1)
        #expect(((json?["pushes"] as? [[String: Any]])?.first?["token"]) as? String == token.rawValue)
        #expect(
            try await call(
                "PUT",
                "/_simulator/tokens/\(token.rawValue)",
                #"{"state": "unregistered", "since": 1800000000}"#
            ).status == 204
        )
        #expect(
            await client.send(notification)
                == .rejected(status: 410, reason: "Unregistered", timestamp: Date(timeIntervalSince1970: 1_800_000_000))
        )
        #expect(try await call("PUT", "/_simulator/faults", #"{"unavailableUntil": 4000000000}"#).status == 204)
        #expect(await client.send(notification) == .rejected(status: 503, reason: "ServiceUnavailable", timestamp: nil))
        #expect(try await call("PUT", "/_simulator/faults", #"{"nonsense": true, "hangNext": "x"}"#).status == 400)
        await control.close()
        await client.shutdown()
        #expect(await simulator.stop() == 0)
    }
}
