import Crypto
import Foundation
import Gateway
import NIOCore
import NIOSSL
import Synchronization
import _CryptoExtras

/// `broker apns-simulator --benchmark` in its own process (so it does not share the broker's memory or actors).
final class SimulatorProcess: Sendable {
    let port: Int
    let work: String
    let identity: APNsSigningIdentity
    /// The FCM service account its token endpoint knows (its key file is `serviceAccountPath`).
    let account: FCMServiceAccount
    /// The latency the simulator adds to every answer: median in milliseconds, and the spread of its logarithm.
    let latency: (median: Double, spread: Double)
    private let process: Mutex<Process?>

    var certificatePath: String { work + "/tls/self-signed.crt" }
    var keyPath: String { work + "/AuthKey.p8" }
    var serviceAccountPath: String { work + "/service-account.json" }

    private init(
        port: Int,
        work: String,
        identity: APNsSigningIdentity,
        account: FCMServiceAccount,
        latency: (median: Double, spread: Double),
        process: Process
    ) {
        self.port = port
        self.work = work
        self.identity = identity
        self.account = account
        self.latency = latency
        self.process = Mutex(process)
    }

    static var brokerBinary: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("broker").path
    }

    /// The control API's bearer token, handed to the simulator process in its environment.
    static let controlToken = (0..<4).map { _ in String(UInt64.random(in: .min ... .max), radix: 16) }.joined()

    static func start(work: String, latency: (median: Double, spread: Double) = (0, 0)) async throws -> SimulatorProcess
    {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: work + "/AuthKey.p8", atomically: true, encoding: .utf8)
        let identity = APNsSigningIdentity(teamID: "BENCHTEAM1", keyID: "BENCHKEY01", key: key)
        let account = FCMServiceAccount(
            projectID: "bench-project",
            clientEmail: "bench@bench-project.iam.gserviceaccount.com",
            privateKeyID: "bench",
            key: try _RSA.Signing.PrivateKey(keySize: .bits2048)
        )
        try account.json().write(to: URL(fileURLWithPath: work + "/service-account.json"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: brokerBinary)
        process.environment = ProcessInfo.processInfo.environment.merging(
            ["BROKER_SIMULATOR_CONTROL_TOKEN": controlToken]
        ) { $1 }
        process.arguments = [
            "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", work, "--key", "BENCHKEY01=\(work)/AuthKey.p8",
            "--fcm-account", work + "/service-account.json", "--benchmark", "--max-streams", "1000",
            "--log-level", "error",
        ]
        let output = Mutex("")
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.withLock { $0 += text }
        }
        try process.run()
        for _ in 0..<500 {
            if let match = output.withLock({ $0 }).firstMatch(of: #/127\.0\.0\.1:(\d+) /#), let port = Int(match.1) {
                return SimulatorProcess(
                    port: port,
                    work: work,
                    identity: identity,
                    account: account,
                    latency: latency,
                    process: process
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw BenchError("the simulator did not start: \(output.withLock { $0 })")
    }

    /// CPU seconds the simulator process has used so far.
    func cpuSeconds() -> Double {
        let pid = process.withLock { $0?.processIdentifier }
        return pid.flatMap { Machine.cpuSeconds(pid: $0) } ?? 0
    }

    func stop() {
        process.withLock {
            $0?.terminate()
            $0?.waitUntilExit()
            $0 = nil
        }
    }

    func tls() -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(certificatePath)
        return tls
    }

    /// One control request on a fresh connection.
    func control(_ method: String, _ path: String, _ body: String? = nil) async throws -> HTTP2Message {
        let connection = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: port,
            tls: tls(),
            serverHostname: "localhost"
        )
        defer { Task { await connection.close() } }
        return try await connection.send(
            [
                HTTP2Header(":method", method), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                HTTP2Header(":authority", "localhost"), HTTP2Header("authorization", "Bearer \(Self.controlToken)"),
            ],
            body: body.map { ByteBuffer(string: $0) },
            deadline: .seconds(10)
        )
    }

    /// Clears the counts and sets the share of dead tokens (and the latency of every answer).
    func prepare(deadPercent: Int) async throws {
        _ = try await control("DELETE", "/_simulator/accepted")
        _ = try await control("DELETE", "/_simulator/fcm/accepted")
        let faults =
            #"{"deadTokenPercent": \#(deadPercent), "latencyMilliseconds": \#(latency.median), "#
            + #""latencySpread": \#(latency.spread)}"#
        let reply = try await control("PUT", "/_simulator/faults", faults)
        guard reply.status == 204 else {
            throw BenchError("the simulator refused its faults: \(reply.status.map(String.init) ?? "no status")")
        }
    }

    /// What it accepted and rejected, APNs' and FCM's together.
    func counts() async throws -> (accepted: Int, rejected: Int) {
        var total = (accepted: 0, rejected: 0)
        for path in ["/_simulator/accepted?limit=0", "/_simulator/fcm/accepted?limit=0"] {
            let reply = try await control("GET", path)
            let json = try JSONSerialization.jsonObject(with: Data(reply.body.readableBytesView)) as? [String: Any]
            total.accepted += json?["accepted"] as? Int ?? 0
            total.rejected += json?["rejected"] as? Int ?? 0
        }
        return total
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
