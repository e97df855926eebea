import Foundation
import NIOSSL
import TestSupport
import Testing

@testable import Gateway

/// The REST listener's certificate replaced without a restart: new connections get the new one, open ones finish.
@Suite("TLS certificate reload", .timeLimit(.minutes(2)))
struct TLSReloadTests {
    /// Writes a fresh self-signed pair for localhost to the paths; returns the certificate's PEM.
    static func writePair(_ files: TLSFiles) throws -> String {
        let (certificate, key) = try SelfSignedCertificate.make(hostnames: ["localhost"])
        try key.write(toFile: files.privateKeyPath, atomically: true, encoding: .utf8)
        try certificate.write(toFile: files.certificatePath, atomically: true, encoding: .utf8)
        return certificate
    }

    /// An HTTP/2 connection that trusts only `certificate`.
    static func connect(port: Int, trusting certificate: String) async throws -> HTTP2ClientConnection {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(certificate.utf8), format: .pem)])
        return try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port,
            tls: tls,
            serverHostname: "localhost"
        )
    }

    static func health(_ connection: HTTP2ClientConnection) async throws -> Int? {
        try await connection.send(
            [
                HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "https"), HTTP2Header(":path", "/health"),
                HTTP2Header(":authority", "localhost"),
            ],
            deadline: .seconds(10)
        ).status
    }

    @Test("SIGHUP reloads the certificate of a running broker: new connections get it, an open one goes on")
    func sighup() async throws {
        let data = TestBroker.temporaryDirectory()
        let files = TLSFiles(certificatePath: data + "/rest.crt", privateKeyPath: data + "/rest.key")
        let first = try Self.writePair(files)
        let config = """
            {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "off", "logLevel": "notice",
             "tlsCertificate": "\(files.certificatePath)", "tlsPrivateKey": "\(files.privateKeyPath)"}
            """
        try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
        let broker = try RunningBroker(["serve", "--config", data + "/broker.json"])
        defer { broker.terminate() }
        let port = try #require(try await broker.port(matching: /listener=https port=(\d+)/), "\(broker.output)")
        let open = try await Self.connect(port: port, trusting: first)
        #expect(try await Self.health(open) == 200)

        let second = try Self.writePair(files)
        kill(broker.process.processIdentifier, SIGHUP)
        #expect(try await eventually { broker.output.contains("TLS certificate reloaded") }, "\(broker.output)")
        // A new connection gets the new certificate: one trusting only the old one fails its handshake.
        await #expect(throws: (any Error).self) { _ = try await Self.connect(port: port, trusting: first) }
        let renewed = try await Self.connect(port: port, trusting: second)
        #expect(try await Self.health(renewed) == 200)
        // The connection opened before goes on with the old one.
        #expect(try await Self.health(open) == 200)
        await open.close()
        await renewed.close()

        // A pair that does not load (a key of another certificate) is refused; the previous one stays in use.
        let (_, otherKey) = try SelfSignedCertificate.make(hostnames: ["localhost"])
        try otherKey.write(toFile: files.privateKeyPath, atomically: true, encoding: .utf8)
        kill(broker.process.processIdentifier, SIGHUP)
        #expect(
            try await eventually { broker.output.contains("cannot reload the TLS certificate") },
            "\(broker.output)"
        )
        let still = try await Self.connect(port: port, trusting: second)
        #expect(try await Self.health(still) == 200)
        await still.close()
        #expect(await broker.stop() == 0)
    }

    @Test("A change to the files is noticed by their size and time; unchanged files are not read again")
    func fileChange() throws {
        let data = TestBroker.temporaryDirectory()
        let files = TLSFiles(certificatePath: data + "/rest.crt", privateKeyPath: data + "/rest.key")
        _ = try Self.writePair(files)
        let tls = try ServerTLS(files: files)
        let before = tls.context
        #expect(try tls.reload(onlyIfChanged: true) == false)
        #expect(tls.context === before)
        // Modification times may be equal within a second: the new pair is written with a later time.
        _ = try Self.writePair(files)
        let later = Date().addingTimeInterval(5)
        for path in [files.certificatePath, files.privateKeyPath] {
            try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: path)
        }
        #expect(try tls.reload(onlyIfChanged: true) == true)
        #expect(tls.context !== before)
    }
}
