import Crypto
import Foundation
import Gateway
import NIOCore
import NIOSSL

/// A `broker apns-simulator` process for the process tests: signing key `KEY0000001` in `<data>/AuthKey.p8`, its
/// TLS certificate in `<data>/sim/tls`, and a connection to its control API.
struct SimulatorUnderTest {
    let process: RunningBroker
    let port: Int
    let control: HTTP2ClientConnection
    /// The folder of the key and of the simulator's own files.
    let data: String

    /// `fcmAccount`: a service account key file its FCM side accepts.
    static func start(data: String, maxStreams: Int = 16, fcmAccount: String? = nil) async throws -> SimulatorUnderTest
    {
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: data + "/AuthKey.p8", atomically: true, encoding: .utf8)
        let process = try RunningBroker(
            [
                "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data + "/sim", "--key",
                "KEY0000001=\(data)/AuthKey.p8", "--topic", "com.acme.impulse", "--max-streams", "\(maxStreams)",
                "--log-level", "error",
            ] + (fcmAccount.map { ["--fcm-account", $0] } ?? [])
        )
        do {
            guard let port = try await process.port(matching: #/127\.0\.0\.1:(\d+) /#) else {
                throw SimulatorFailed(output: process.output)
            }
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(data + "/sim/tls/self-signed.crt")
            let control = try await HTTP2ClientConnection.connect(
                host: "127.0.0.1",
                port: port,
                tls: tls,
                serverHostname: "localhost"
            )
            return SimulatorUnderTest(process: process, port: port, control: control, data: data)
        } catch {
            process.terminate()
            throw error
        }
    }

    struct SimulatorFailed: Error, CustomStringConvertible {
        var output: String
        var description: String { "the simulator did not start: \(output)" }
    }

    /// One request to the control API.
    func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> HTTP2Message {
        try await control.send(
            [
                HTTP2Header(":method", method), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                HTTP2Header(":authority", "localhost"), RunningBroker.controlAuthorization,
            ],
            body: body.map { ByteBuffer(string: $0) },
            deadline: .seconds(30)
        )
    }

    /// Every push it accepted, oldest first, read in pages.
    func acceptedPushes() async throws -> [[String: Any]] {
        var pushes: [[String: Any]] = []
        while true {
            let listing = try await call("GET", "/_simulator/accepted?offset=\(pushes.count)&limit=1000")
            let json = try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
            let page = json?["pushes"] as? [[String: Any]] ?? []
            if page.isEmpty { return pushes }
            pushes += page
        }
    }

    /// Every FCM message it accepted, oldest first, read in pages.
    func acceptedMessages() async throws -> [[String: Any]] {
        var messages: [[String: Any]] = []
        while true {
            let listing = try await call("GET", "/_simulator/fcm/accepted?offset=\(messages.count)&limit=1000")
            let json = try JSONSerialization.jsonObject(with: Data(listing.body.readableBytesView)) as? [String: Any]
            let page = json?["messages"] as? [[String: Any]] ?? []
            if page.isEmpty { return messages }
            messages += page
        }
    }

    /// The `fcm` member of a broker configuration that pushes here with the key file `account`.
    func fcmConfiguration(account: String) -> String {
        """
        {"mode": "external", "endpoint": "127.0.0.1:\(port)", "serverHostname": "localhost",
         "trustRoots": "\(data)/sim/tls/self-signed.crt", "serviceAccount": "\(account)"}
        """
    }

    /// The `apns` member of a broker configuration that pushes here with the key above.
    var apnsConfiguration: String {
        """
        {"mode": "external", "production": "127.0.0.1:\(port)", "serverHostname": "localhost",
         "trustRoots": "\(data)/sim/tls/self-signed.crt",
         "credential": {"teamID": "TEAM000001", "keyID": "KEY0000001", "keyFile": "\(data)/AuthKey.p8"}}
        """
    }

    /// Stops the process (its control connection closes with it).
    func stop() async {
        _ = await process.stop()
    }

    /// Sends SIGTERM without waiting, for a `defer`.
    func terminate() {
        process.terminate()
    }
}
