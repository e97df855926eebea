import Crypto
import Engine
import Foundation
import NIOSSL
import TestSupport
import Testing

@testable import Gateway

@Suite("APNs certificate authentication", .timeLimit(.minutes(3)))
struct APNsCertificateTests {
    /// A server that requires a client certificate it trusts, as APNs does in certificate mode.
    func start(trusting client: NIOSSLCertificate) async throws -> (APNsSimulator, Int, TLSConfiguration) {
        var (serverTLS, clientTLS) = try EnginePair.tls()
        serverTLS.certificateVerification = .noHostnameVerification
        serverTLS.trustRoots = .certificates([client])
        let simulator = APNsSimulator(configuration: APNsSimulatorConfiguration(tls: serverTLS))
        return (simulator, try await simulator.start(), clientTLS)
    }

    func writeClientIdentity(_ directory: String) throws -> NIOSSLCertificate {
        let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: ["provider.example"])
        try certificatePEM.write(toFile: directory + "/client.crt", atomically: true, encoding: .utf8)
        try keyPEM.write(toFile: directory + "/client.key", atomically: true, encoding: .utf8)
        return try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
    }

    func push() throws -> APNsNotification {
        try APNsNotification(
            token: try DeviceToken(String(repeating: "12", count: 32)),
            topic: "com.acme.impulse",
            payload: Data(#"{"aps":{}}"#.utf8)
        )
    }

    @Test("A PEM client certificate authenticates; without it the TLS handshake fails and nothing is accepted")
    func pem() async throws {
        let directory = TestBroker.temporaryDirectory()
        let certificate = try writeClientIdentity(directory)
        let (simulator, port, clientTLS) = try await start(trusting: certificate)
        let tls = try APNsCertificate.tls(
            certificatePEM: directory + "/client.crt",
            privateKeyPEM: directory + "/client.key",
            base: clientTLS
        )
        let client = HTTP2PushClient(
            configuration: .init(host: "127.0.0.1", port: port, tls: tls, serverHostname: "localhost"),
            authentication: .certificate,
            logger: TestBroker.logger
        )
        let notification = try push()
        #expect(await client.send(notification) == .accepted(apnsID: notification.apnsID))
        let anonymous = HTTP2PushClient(
            configuration: .init(
                host: "127.0.0.1",
                port: port,
                tls: clientTLS,
                serverHostname: "localhost",
                connectTimeout: .seconds(2),
                unreachableWait: .seconds(2)
            ),
            authentication: .certificate,
            logger: TestBroker.logger
        )
        let refused = await anonymous.send(notification)
        if case .transportFailure = refused {} else { Issue.record("expected a transport failure, got \(refused)") }
        #expect(simulator.counts.accepted == 1)
        await client.shutdown()
        await anonymous.shutdown()
        await simulator.stop()
    }

    @Test("A PKCS#12 bundle (as the Keychain exports it) authenticates")
    func pkcs12() async throws {
        let directory = TestBroker.temporaryDirectory()
        let certificate = try writeClientIdentity(directory)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "pkcs12", "-export", "-in", directory + "/client.crt", "-inkey", directory + "/client.key", "-out",
            directory + "/client.p12", "-passout", "pass:sekrit",
        ]
        try openssl.run()
        await openssl.exited()
        try #require(openssl.terminationStatus == 0)
        let (simulator, port, clientTLS) = try await start(trusting: certificate)
        let tls = try APNsCertificate.tls(pkcs12: directory + "/client.p12", passphrase: "sekrit", base: clientTLS)
        let client = HTTP2PushClient(
            configuration: .init(host: "127.0.0.1", port: port, tls: tls, serverHostname: "localhost"),
            authentication: .certificate,
            logger: TestBroker.logger
        )
        let notification = try push()
        #expect(await client.send(notification) == .accepted(apnsID: notification.apnsID))
        #expect(throws: (any Error).self) {
            try APNsCertificate.tls(pkcs12: directory + "/client.p12", passphrase: "wrong")
        }
        await client.shutdown()
        await simulator.stop()
    }
}
