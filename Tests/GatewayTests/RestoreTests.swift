import AsyncHTTPClient
import Crypto
import Foundation
import GRDB
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import TestSupport
import Testing

/// `broker store restore` when it is needed (issue 44): over the damaged file a restore exists for, refused while a
/// broker has the file open, leaving nothing behind when it fails; and `broker store backup --into` with what a
/// restore on a new machine needs beside the database (media, the TLS pair, the credential key).
@Suite("Restores when they are needed", .timeLimit(.minutes(3)))
struct RestoreTests {
    /// A data folder with a tenant and a backup file of it.
    func deployment() async throws -> (data: String, backup: String) {
        let data = TestBroker.temporaryDirectory()
        #expect(
            try await BrokerProcess.run(["tenant", "create", "acme", "--name", "Acme"], dataDirectory: data).status == 0
        )
        let backup = data + "/backup.sqlite"
        let taken = try await BrokerProcess.run(
            ["store", "backup", "--from", data + "/broker.sqlite", "--to", backup],
            dataDirectory: nil
        )
        #expect(taken.status == 0, "\(taken.error)")
        return (data, backup)
    }

    /// The folder's files other than the database's own and the kept copies: what a restore may not leave behind.
    func leftovers(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter {
            $0.hasSuffix(".restoring") || $0.hasSuffix(".partial")
        }
    }

    @Test(
        "A restore over a truncated or overwritten file works, keeps the damaged one with its WAL, leaves nothing else",
        arguments: ["truncated", "garbage"]
    )
    func overDamagedFile(_ damage: String) async throws {
        let (data, backup) = try await deployment()
        let target = data + "/broker.sqlite"
        let original = try Data(contentsOf: URL(fileURLWithPath: target))
        switch damage {
        case "truncated": try original.prefix(original.count / 3).write(to: URL(fileURLWithPath: target))
        default:
            var bytes = original
            bytes.replaceSubrange(
                0..<min(4096, bytes.count),
                with: Data(repeating: 0x5A, count: min(4096, bytes.count))
            )
            try bytes.write(to: URL(fileURLWithPath: target))
        }
        #expect(try await BrokerProcess.run(["tenant", "list"], dataDirectory: data).status != 0)
        try Data("the damaged file's log".utf8).write(to: URL(fileURLWithPath: target + "-wal"))

        let restored = try await BrokerProcess.run(
            ["store", "restore", "--from", backup, "--to", target],
            dataDirectory: nil
        )
        #expect(restored.status == 0, "\(restored.output) \(restored.error)")
        let listed = try await BrokerProcess.run(["tenant", "list"], dataDirectory: data)
        #expect(listed.status == 0 && listed.output.contains("acme"), "\(listed.output) \(listed.error)")
        let names = try FileManager.default.contentsOfDirectory(atPath: data)
        let kept = try #require(
            names.first {
                $0.hasPrefix("broker.sqlite.before-restore-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
            }
        )
        #expect(names.contains(kept + "-wal"), "the damaged file's WAL was not kept with it: \(names)")
        #expect(!names.contains("broker.sqlite-wal") || names.contains("broker.sqlite"))
        #expect(try leftovers(data).isEmpty)
        #expect(!names.contains { $0.hasPrefix("backup.sqlite") && $0 != "backup.sqlite" }, "\(names)")
    }

    @Test("A restore is refused while a broker serves the file: nothing moves; once it stops, the restore works")
    func refusedWhileServing() async throws {
        let (data, backup) = try await deployment()
        let target = data + "/broker.sqlite"
        let broker = try RunningBroker([
            "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "notice",
        ])
        defer { broker.terminate() }
        #expect(try await broker.port(matching: /listener=https port=(\d+)/) != nil, "\(broker.output)")
        let before = try FileManager.default.attributesOfItem(atPath: target)[.systemFileNumber] as? Int
        let refused = try await BrokerProcess.run(
            ["store", "restore", "--from", backup, "--to", target],
            dataDirectory: nil
        )
        #expect(refused.status != 0)
        #expect(refused.error.contains("a process has") && refused.error.contains("stop it first"), "\(refused.error)")
        #expect(try FileManager.default.attributesOfItem(atPath: target)[.systemFileNumber] as? Int == before)
        #expect(try leftovers(data).isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: data).allSatisfy { !$0.contains("before-restore") }
        )
        // An admin command still opens the store beside the broker (both share it).
        #expect(try await BrokerProcess.run(["tenant", "list"], dataDirectory: data).status == 0)
        #expect(await broker.stop() == 0)
        let restored = try await BrokerProcess.run(
            ["store", "restore", "--from", backup, "--to", target],
            dataDirectory: nil
        )
        #expect(restored.status == 0, "\(restored.error)")
    }

    @Test(
        "A restore that fails (a bad backup, an unwritable folder) leaves the target as it was and nothing of its own"
    )
    func failuresLeaveNothing() async throws {
        let (data, _) = try await deployment()
        let target = data + "/broker.sqlite"
        let original = try Data(contentsOf: URL(fileURLWithPath: target))
        var truncated = try Data(contentsOf: URL(fileURLWithPath: data + "/backup.sqlite"))
        truncated = truncated.prefix(truncated.count / 2)
        try truncated.write(to: URL(fileURLWithPath: data + "/half.sqlite"))
        let bad = try await BrokerProcess.run(
            ["store", "restore", "--from", data + "/half.sqlite", "--to", target],
            dataDirectory: nil
        )
        #expect(bad.status != 0, "\(bad.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == original)
        #expect(try leftovers(data).isEmpty)
    }

    @Test(
        "backup --into holds the database, media, the TLS pair and the key's fingerprint; restored on a new machine it serves the same"
    )
    func wholeDeployment() async throws {
        let data = TestBroker.temporaryDirectory()
        let key = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let environment = ["BROKER_CREDENTIAL_KEY": key]
        #expect(
            try await BrokerProcess.run(
                ["tenant", "create", "acme", "--name", "Acme"],
                dataDirectory: data,
                environment: environment
            ).status == 0
        )
        try FileManager.default.createDirectory(atPath: data + "/media/acme", withIntermediateDirectories: true)
        let image = Data((0..<5000).map { UInt8($0 % 251) })
        try image.write(to: URL(fileURLWithPath: data + "/media/acme/water.png"))
        // A first start generates the TLS pair and serves; a backup taken meanwhile shows in its /metrics.
        let first = try RunningBroker(
            ["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--log-level", "notice"],
            environment: environment.merging(["BROKER_ADMIN_LISTEN": "127.0.0.1:0"]) { $1 }
        )
        defer { first.terminate() }
        let adminPort = try #require(try await first.port(matching: /listener=admin port=(\d+)/), "\(first.output)")
        let backups = TemporaryDirectories.make("impulse-broker-backups-")
        var paths: [String] = []
        for round in 0..<3 {
            let taken = try await BrokerProcess.run(
                ["store", "backup", "--data-dir", data, "--into", backups, "--keep", "2"]
                    + (round == 2 ? ["--with-credential-key"] : []),
                dataDirectory: nil,
                environment: environment
            )
            #expect(taken.status == 0, "\(taken.output) \(taken.error)")
            paths.append(String(taken.output.split(separator: " ")[3].dropLast()))
            if round < 2 { try await Task.sleep(for: .milliseconds(1100)) }  // backups are named by the second
        }
        let kept = try FileManager.default.contentsOfDirectory(atPath: backups).sorted()
        #expect(kept.count == 2 && kept.allSatisfy { $0.hasPrefix("impulse-broker-") }, "\(kept)")
        let latest = try #require(paths.last)
        let files = try FileManager.default.contentsOfDirectory(atPath: latest).sorted()
        #expect(files == ["broker.sqlite", "credential.key", "manifest.json", "media", "tls"], "\(files)")
        let keyMode = try FileManager.default.attributesOfItem(atPath: latest + "/credential.key")[.posixPermissions]
        #expect(keyMode as? Int == 0o600)
        let metrics = try await Self.get("http://127.0.0.1:\(adminPort)/metrics")
        #expect(metrics.contains("broker_backup_last_success_timestamp_seconds"), "\(metrics.suffix(500))")
        let port = try #require(try await first.port(matching: /listener=https port=(\d+)/))
        let served = try await Self.certificateFingerprint(port: port)
        #expect(await first.stop() == 0)

        // A new machine: a different key is refused before anything moves; the right one restores everything.
        let fresh = TestBroker.temporaryDirectory()
        let otherKey = Data(repeating: 9, count: 32).base64EncodedString()
        let wrong = try await BrokerProcess.run(
            ["store", "restore", "--data-dir", fresh, "--from", latest],
            dataDirectory: nil,
            environment: ["BROKER_CREDENTIAL_KEY": otherKey]
        )
        #expect(wrong.status != 0 && wrong.error.contains("credential key"), "\(wrong.error)")
        #expect(!FileManager.default.fileExists(atPath: fresh + "/broker.sqlite"))
        let restored = try await BrokerProcess.run(
            ["store", "restore", "--data-dir", fresh, "--from", latest],
            dataDirectory: nil,
            environment: environment
        )
        #expect(restored.status == 0, "\(restored.output) \(restored.error)")
        let second = try RunningBroker(
            ["serve", "--data-dir", fresh, "--listen", "127.0.0.1:0", "--log-level", "notice"],
            environment: environment
        )
        defer { second.terminate() }
        let again = try #require(try await second.port(matching: /listener=https port=(\d+)/), "\(second.output)")
        #expect(
            try await Self.certificateFingerprint(port: again) == served,
            "the restored broker serves another certificate"
        )
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        let response = try await client.execute(
            HTTPClientRequest(url: "https://127.0.0.1:\(again)/media/acme/water.png"),
            timeout: .seconds(30)
        )
        let body = try await response.body.collect(upTo: 1 << 20)
        #expect(response.status.code == 200 && Data(body.readableBytesView) == image)
        try await client.shutdown()
        #expect(await second.stop() == 0)
    }

    static func get(_ url: String) async throws -> String {
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
        return String(buffer: try await response.body.collect(upTo: 4 << 20))
    }

    /// The SHA-256 of the certificate a TLS listener presents.
    static func certificateFingerprint(port: Int) async throws -> String {
        let captured = NIOLockedValueBox<[UInt8]?>(nil)
        let context = try NIOSSLContext(configuration: .makeClientConfiguration())
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: nil) {
                        certificates,
                        promise in
                        captured.withLockedValue { $0 = try? certificates.first?.toDERBytes() }
                        promise.succeed(.certificateVerified)
                    }
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
        defer { channel.close(promise: nil) }
        #expect(try await eventually { captured.withLockedValue { $0 } != nil })
        let bytes = try #require(captured.withLockedValue { $0 })
        return SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }
}
