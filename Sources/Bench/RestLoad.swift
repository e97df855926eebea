import Engine
import Foundation
import Gateway
import Logging

/// Scenario 3: authenticated `GET /CurrentImpulse` for several users at once, beside nghttpd serving a static file
/// of the same size with the same h2load settings, in the same run.
enum RestLoad {
    static let users = 4

    /// A broker on a fresh store in `work` whose default tenant has `users` users (`u1`... with password `pw`),
    /// each with ten delivered impulses; returns it running, with its HTTPS port.
    static func startBroker(
        work: String,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws -> (app: BrokerApplication, port: Int, running: Task<Void, any Error>) {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let store = try await SQLiteStore(configuration: .init(path: work + "/broker.sqlite"), logger: logger)
        let tenant = try TenantID("rest")
        try await store.createTenant(try Tenant(id: tenant, name: "Rest", apnsTopic: Burst.topic))
        let impulses = try (1...10).map { n in
            try Impulse(
                tenant: tenant,
                id: ImpulseID("impulse-\(n)"),
                language: "EN",
                title: "Impulse \(n)",
                descriptionShort: "A short exercise for a busy day.",
                description: String(repeating: "Take a breath and notice your shoulders. ", count: 4),
                durationMinutes: 5,
                action: .do,
                single: true,
                imageURLs: ["/media/\(n).jpg"],
                videoURL: nil,
                webURL: nil,
                lifeArea: .mindfulness
            )
        }
        _ = try await store.importImpulses(impulses, tenant: tenant)
        let hash = try await Authenticator.hash("pw", cost: 10)
        for n in 1...users {
            let user = try await store.createUser(try NewUser(tenant: tenant, username: "u\(n)", passwordHash: hash))
            _ = try await store.recordDeliveries(
                impulses.map {
                    NewDelivery(tenant: tenant, user: user.id, impulse: $0.id, kind: .manual, assignedAt: Date())
                }
            )
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        var configuration = ServerConfiguration(
            dataDirectory: work,
            listen: ListenAddress(host: "127.0.0.1", port: 0),
            defaultTenant: tenant,
            apns: .disabled,
            scheduler: nil
        )
        configure(&configuration)
        let app = try await buildApplication(configuration: configuration, store: store, logger: logger) {
            listener,
            port in
            if listener == .https { continuation.yield(port) }
        }
        let running = Task { try await app.run() }
        var port = 0
        for await bound in ports {
            port = bound
            break
        }
        return (app, port, running)
    }

    static func run(requests: Int, work: String) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work + "/static", withIntermediateDirectories: true)
        let (app, port, running) = try await startBroker(work: work)
        defer { running.cancel() }
        let url = "https://127.0.0.1:\(port)/CurrentImpulse"
        let body = try runProgram("/usr/bin/curl", ["-sk", "--http2", "-u", "u1:pw", url])
        guard body.hasPrefix(#"{"items""#) else {
            throw BenchError("unexpected /CurrentImpulse body: \(body.prefix(200))")
        }
        try body.write(toFile: work + "/static/CurrentImpulse.json", atomically: true, encoding: .utf8)
        let perUser = max(1, requests / users)
        func load(_ target: String, auth: Bool) -> [[String]] {
            (1...users).map { n in
                var arguments = ["-n", "\(perUser)", "-c", "4", "-m", "10", "-t", "1"]
                if auth {
                    arguments += ["-H", "authorization: Basic " + Data("u\(n):pw".utf8).base64EncodedString()]
                }
                return arguments + [target]
            }
        }
        // Warm the credential cache (the first request of each user pays bcrypt), then measure.
        _ = try H2Load.parallel(
            load(url, auth: true).map { Array($0.dropFirst(2)) + ["-n", "20"] },
            work: work,
            name: "warm"
        )
        let broker = try H2Load.parallel(load(url, auth: true), work: work, name: "broker")
        // The same with `Accept-Encoding: gzip`, as the iPhone clients send it: what compression costs.
        let gzipped = try H2Load.parallel(
            load(url, auth: true).map { ["-H", "accept-encoding: gzip"] + $0 },
            work: work,
            name: "broker-gzip"
        )
        let gzipBody = try runProgram(
            "/usr/bin/curl",
            [
                "-sk", "--http2", "-u", "u1:pw", "-H", "accept-encoding: gzip", "-o", work + "/gzip.body", "-w",
                "%{size_download}", url,
            ]
        )
        await app.shutdown()
        _ = await running.result

        guard let nghttpd = which("nghttpd") else {
            throw BenchError("nghttpd is missing: apt-get install nghttp2-server")
        }
        let staticPort = 20_000 + Int.random(in: 0..<20_000)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: nghttpd)
        server.arguments = [
            "-a", "127.0.0.1", "-d", work + "/static", "\(staticPort)", work + "/tls/self-signed.key",
            work + "/tls/self-signed.crt",
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            // SIGKILL, not `terminate()`: a spawned process inherits this process's blocked signals, SIGTERM among
            // them, and nghttpd left running after every benchmark.
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        try await Task.sleep(for: .milliseconds(500))
        let reference = try H2Load.parallel(
            load("https://127.0.0.1:\(staticPort)/CurrentImpulse.json", auth: false),
            work: work,
            name: "nghttpd"
        )
        let brokerRate = broker["requestsPerSecond"] as? Double ?? 0
        let nghttpdRate = reference["requestsPerSecond"] as? Double ?? 1
        return [
            "bodyBytes": body.utf8.count,
            "users": users,
            "broker": broker,
            "brokerGzip": gzipped,
            "gzipBodyBytes": Int(gzipBody) ?? 0,
            "nghttpd": reference,
            "ratio": brokerRate / max(1, nghttpdRate),
        ]
    }
}
