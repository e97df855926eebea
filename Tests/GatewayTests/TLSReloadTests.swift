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

    @Test("A change to the files is noticed by their contents; unchanged files make no new context")
    func fileChange() throws {
        let data = TestBroker.temporaryDirectory()
        let files = TLSFiles(certificatePath: data + "/rest.crt", privateKeyPath: data + "/rest.key")
        _ = try Self.writePair(files)
        let tls = try ServerTLS(files: files)
        let before = tls.context
        #expect(try tls.reload(onlyIfChanged: true) == false)
        #expect(tls.context === before)
        // The same size, the same modification time, other contents: a new context.
        let stamp = try FileManager.default.attributesOfItem(atPath: files.certificatePath)[.modificationDate]
        _ = try Self.writePair(files)
        for path in [files.certificatePath, files.privateKeyPath] {
            try FileManager.default.setAttributes([.modificationDate: try #require(stamp)], ofItemAtPath: path)
        }
        #expect(try tls.reload(onlyIfChanged: true) == true)
        #expect(tls.context !== before)
    }

    @Test(
        "A Kubernetes Secret rotated by its ..data link is noticed: new connections and the expiry gauge get the new pair"
    )
    func kubernetesSecretRotation() async throws {
        let data = TestBroker.temporaryDirectory()
        let secret = try KubernetesSecretVolume(at: data + "/secret")
        let first = try SelfSignedCertificate.make(hostnames: ["localhost"], validity: 30 * 86_400)
        try secret.project(["tls.crt": first.certificate, "tls.key": first.key])
        let files = TLSFiles(certificatePath: secret.path + "/tls.crt", privateKeyPath: secret.path + "/tls.key")

        // The unit: the links the broker reads never change, only what ..data points at.
        let tls = try ServerTLS(files: files)
        let loaded = tls.context
        let second = try SelfSignedCertificate.make(hostnames: ["localhost"], validity: 90 * 86_400)
        try secret.project(["tls.crt": second.certificate, "tls.key": second.key])
        #expect(try tls.reload(onlyIfChanged: true) == true, "the rotation went unnoticed")
        #expect(tls.context !== loaded)
        #expect(try tls.reload(onlyIfChanged: true) == false)

        // A running broker, looking every 100 ms.
        try secret.project(["tls.crt": first.certificate, "tls.key": first.key])
        try await TestBroker.run(
            directory: data,
            adminToken: "t0ken",
            tlsFiles: files,
            tlsReloadInterval: .milliseconds(100)
        ) { broker in
            let open = try await Self.connect(port: broker.httpsPort, trusting: first.certificate)
            #expect(try await Self.health(open) == 200)
            let before = try await Self.expiryGauge(broker)
            try secret.project(["tls.crt": second.certificate, "tls.key": second.key])
            let renewed = try await eventually {
                guard let connection = try? await Self.connect(port: broker.httpsPort, trusting: second.certificate)
                else { return false }
                defer { Task { await connection.close() } }
                return try await Self.health(connection) == 200
            }
            #expect(renewed, "the new certificate was never served")
            await #expect(throws: (any Error).self) {
                _ = try await Self.connect(port: broker.httpsPort, trusting: first.certificate)
            }
            let after = try await Self.expiryGauge(broker)
            #expect(after - before > 50 * 86_400, "the expiry gauge says \(before) then \(after)")
            // The connection opened before goes on with the old pair.
            #expect(try await Self.health(open) == 200)
            await open.close()
        }
    }

    /// `broker_tls_certificate_expiry_timestamp_seconds` from the broker's `/metrics`.
    static func expiryGauge(_ broker: TestBroker) async throws -> Double {
        let text = try await broker.admin("/metrics", token: "t0ken").text
        let line = try #require(
            text.split(separator: "\n").first { $0.hasPrefix("broker_tls_certificate_expiry_timestamp_seconds") }
        )
        return try #require(Double(line.split(separator: " ").last ?? ""))
    }
}

/// A Secret volume as the kubelet writes it (its AtomicWriter): the files live in a folder named for the time they
/// were written, `..data` links to that folder, and each key is a link `name -> ..data/name`. An update writes a new
/// folder, points a new link `..data_tmp` at it, renames that over `..data` (atomic), and removes the old folder:
/// the links the pod reads never change.
struct KubernetesSecretVolume {
    let path: String
    private let manager = FileManager.default

    init(at path: String) throws {
        self.path = path
        try manager.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Projects `files` (name: contents) as the Secret's new data.
    func project(_ files: [String: String]) throws {
        let old = try? manager.destinationOfSymbolicLink(atPath: path + "/..data")
        let stamp = "..\(Int(Date().timeIntervalSince1970 * 1_000_000))_\(UInt32.random(in: 0...UInt32.max))"
        try manager.createDirectory(atPath: path + "/" + stamp, withIntermediateDirectories: false)
        for (name, contents) in files {
            try contents.write(toFile: path + "/" + stamp + "/" + name, atomically: false, encoding: .utf8)
        }
        try? manager.removeItem(atPath: path + "/..data_tmp")
        try manager.createSymbolicLink(atPath: path + "/..data_tmp", withDestinationPath: stamp)
        guard rename(path + "/..data_tmp", path + "/..data") == 0 else {
            throw CocoaError(.fileWriteUnknown)
        }
        for name in files.keys where !manager.fileExists(atPath: path + "/" + name) {
            try manager.createSymbolicLink(atPath: path + "/" + name, withDestinationPath: "..data/" + name)
        }
        if let old { try manager.removeItem(atPath: path + "/" + old) }
    }
}
