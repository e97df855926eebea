import AsyncHTTPClient
import Engine
import Foundation
import GRDB
import Gateway
import Synchronization
import TestSupport
import Testing

/// Runs the real `broker` executable that `swift test` builds next to the test bundle.
struct BrokerProcess {
    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("broker")
    }

    /// Runs an admin command to completion and returns its exit code and output.
    @discardableResult
    static func run(
        _ arguments: [String],
        dataDirectory: String?,
        stdin: String? = nil,
        environment: [String: String] = [:]
    ) async throws -> (
        status: Int32, output: String, error: String
    ) {
        try await offThePool {
            try runBlocking(arguments, dataDirectory: dataDirectory, stdin: stdin, environment: environment)
        }
    }

    private static func runBlocking(
        _ arguments: [String],
        dataDirectory: String?,
        stdin: String?,
        environment: [String: String]
    ) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.executableURL = executable
        var all = arguments
        if let dataDirectory { all += ["--data-dir", dataDirectory] }
        process.arguments = all
        process.environment = ["BROKER_BCRYPT_COST": "4", "PATH": "/usr/bin:/bin"].merging(environment) { $1 }
        let output = Pipe()
        let error = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }
}

/// A background `broker` process whose stdout and stderr are collected.
final class RunningBroker: @unchecked Sendable {
    // Only touched from the test task and the pipes' reading, which `lock` guards.
    let process = Process()
    private let lock = NSLock()
    private var collected = ""

    /// The control token every `broker apns-simulator` the tests start is given.
    static let controlToken = "test-control-token-0123456789"
    static let controlAuthorization = HTTP2Header("authorization", "Bearer \(controlToken)")

    /// `executable` is this build's `broker` unless a test runs another (the previous release's, `PreviousReleaseTests`).
    init(_ arguments: [String], environment: [String: String] = [:], executable: URL = BrokerProcess.executable) throws
    {
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ["BROKER_BCRYPT_COST": "4", "BROKER_SIMULATOR_CONTROL_TOKEN": Self.controlToken]
            .merging(environment) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            guard let self else { return }
            self.lock.lock()
            self.collected += text
            self.lock.unlock()
        }
        try process.run()
    }

    var output: String {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }

    /// Waits until the output matches, returning the first capture as a number.
    func port(matching pattern: Regex<(Substring, Substring)>) async throws -> Int? {
        for _ in 0..<500 {
            if let match = output.firstMatch(of: pattern), let port = Int(match.1) { return port }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Sends SIGTERM and waits for the exit (off the cooperative pool); returns the exit status.
    func stop() async -> Int32 {
        terminate()
        await process.exited()
        return process.terminationStatus
    }

    /// Sends SIGTERM if the process still runs, without waiting: for a test's `defer`, which cannot wait.
    func terminate() {
        if process.isRunning { process.terminate() }
    }
}

@Suite("The broker executable", .timeLimit(.minutes(2)))
struct BrokerProcessTests {
    @Test("Admin commands create a tenant, users and a catalog, and report bad input with a non-zero exit")
    func adminCommands() async throws {
        let data = TestBroker.temporaryDirectory()
        #expect(
            try await BrokerProcess.run(["tenant", "create", "acme", "--name", "Acme"], dataDirectory: data).status == 0
        )
        let duplicate = try await BrokerProcess.run(["tenant", "create", "acme"], dataDirectory: data)
        #expect(duplicate.status != 0)
        #expect(duplicate.error.contains("already exists"))
        #expect(try await BrokerProcess.run(["tenant", "create", "Not Valid"], dataDirectory: data).status != 0)
        let added = try await BrokerProcess.run(
            ["user", "add", "acme", "zoë", "--password-stdin", "--language", "de", "--time-zone", "Europe/Vienna"],
            dataDirectory: data,
            stdin: "pä:ss%&\n"
        )
        #expect(added.status == 0, "\(added.error)")
        #expect(
            try await BrokerProcess.run(
                ["user", "add", "acme", "x", "--password-stdin"],
                dataDirectory: data,
                stdin: "\n"
            )
            .status != 0
        )
        #expect(
            try await BrokerProcess.run(
                ["user", "add", "acme", "y", "--time-zone", "Mars/Base", "--password", "p"],
                dataDirectory: data
            ).status != 0
        )
        // When new users start: the tenant's setting and a user's own, the same rule as the admin API's.
        let badStart = try await BrokerProcess.run(
            ["user", "add", "acme", "w", "--password", "p", "--first-delivery", "soon"],
            dataDirectory: data
        )
        #expect(badStart.status != 0 && badStart.error.contains("next-delivery-time or immediate"), "\(badStart.error)")
        #expect(
            try await BrokerProcess.run(
                ["user", "add", "acme", "w", "--password", "p", "--first-delivery", "immediate"],
                dataDirectory: data
            ).status == 0
        )
        #expect(
            try await BrokerProcess.run(
                ["tenant", "update", "acme", "--first-delivery", "immediate"],
                dataDirectory: data
            )
            .status == 0
        )
        let tenants = try DatabaseQueue(path: data + "/broker.sqlite")
        #expect(
            try await tenants.read {
                try String.fetchOne($0, sql: "SELECT first_delivery FROM tenants WHERE id = 'acme'")
            } == "immediate"
        )
        let catalog = data + "/catalog.json"
        try Data(
            #"""
            {"items": [{"workingID": "w1", "language": "DE", "title": "T", "descriptionShort": "S", "description": "D",
              "duration": 2, "action": "read", "single": true, "imageURLs": [], "videoURL": null, "webURL": null,
              "lifeArea": "family"}]}
            """#.utf8
        ).write(to: URL(fileURLWithPath: catalog))
        let imported = try await BrokerProcess.run(["catalog", "import", "acme", catalog], dataDirectory: data)
        #expect(imported.output.contains("1 new"), "\(imported.error)")
        try Data(#"{"items": [{"workingID": "w2"}]}"#.utf8).write(to: URL(fileURLWithPath: catalog))
        let rejected = try await BrokerProcess.run(["catalog", "import", "acme", catalog], dataDirectory: data)
        #expect(rejected.status != 0)
        #expect(rejected.error.contains("missing member"))
        // Links under /media/ must name files the media folder serves; the error names the item and the path.
        try FileManager.default.createDirectory(atPath: data + "/media/pics", withIntermediateDirectories: true)
        try Data("jpeg".utf8).write(to: URL(fileURLWithPath: data + "/media/pics/a.jpg"))
        try Data(
            #"""
            {"items": [
              {"workingID": "m1", "language": "DE", "title": "T", "descriptionShort": "S", "description": "D",
               "duration": 2, "action": "read", "single": true, "imageURLs": ["/media/pics/a.jpg"], "lifeArea": "family"},
              {"workingID": "m2", "language": "DE", "title": "T", "descriptionShort": "S", "description": "D",
               "duration": 2, "action": "read", "single": true, "imageURLs": ["https://cdn.example.com/b.jpg"],
               "videoURL": "/media/pics/missing.mp4", "lifeArea": "family"}]}
            """#.utf8
        ).write(to: URL(fileURLWithPath: catalog))
        let missing = try await BrokerProcess.run(["catalog", "import", "acme", catalog], dataDirectory: data)
        #expect(missing.status != 0)
        #expect(
            missing.error.contains("item 1: video /media/pics/missing.mp4 is not in the media folder"),
            "\(missing.error)"
        )
        #expect(!missing.error.lowercased().contains("usage"), "\(missing.error)")
        try Data("mp4".utf8).write(to: URL(fileURLWithPath: data + "/media/pics/missing.mp4"))
        let complete = try await BrokerProcess.run(["catalog", "import", "acme", catalog], dataDirectory: data)
        #expect(complete.output.contains("2 new"), "\(complete.error)")
        // An existing name is an error, without the usage text after it.
        let twice = try await BrokerProcess.run(
            ["user", "add", "acme", "zoë", "--password", "again"],
            dataDirectory: data
        )
        #expect(twice.status != 0)
        #expect(twice.error.contains("already exists"), "\(twice.error)")
        #expect(!twice.error.lowercased().contains("usage"), "\(twice.error)")
        #expect(try await BrokerProcess.run(["deliver", "acme", "zoë", "w1"], dataDirectory: data).status == 0)
        #expect(try await BrokerProcess.run(["user", "disable", "acme", "zoë"], dataDirectory: data).status == 0)
        let changed = try await BrokerProcess.run(
            ["user", "set-password", "acme", "zoë", "--password-stdin"],
            dataDirectory: data,
            stdin: "neu\n"
        )
        #expect(changed.status == 0)
        #expect(try await BrokerProcess.run(["user", "disable", "acme", "nobody"], dataDirectory: data).status != 0)
        let listed = try await BrokerProcess.run(["user", "list", "acme"], dataDirectory: data)
        #expect(listed.output.contains("zoë\tdisabled\tDE\tEurope/Vienna"))
        #expect(!listed.output.contains("pä:ss"))
    }

    @Test("A configuration file sets the data directory; a broken one stops the command with its reason")
    func configurationFile() async throws {
        let none: String? = nil
        let folder = TestBroker.temporaryDirectory()
        let config = folder + "/broker.json"
        try Data(#"{"dataDirectory": "\#(folder)/from-file", "bcryptCost": 4}"#.utf8).write(
            to: URL(fileURLWithPath: config)
        )
        #expect(
            try await BrokerProcess.run(["tenant", "create", "filed", "--config", config], dataDirectory: none).status
                == 0
        )
        #expect(FileManager.default.fileExists(atPath: folder + "/from-file/broker.sqlite"))
        let listed = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(listed.output.hasPrefix("filed\t"))
        try Data(#"{"bcryptCost": "high"}"#.utf8).write(to: URL(fileURLWithPath: config))
        let broken = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(broken.status != 0)
        #expect(broken.error.contains("bcryptCost"))
        // Push limits: a batch larger than what may be in flight, and a zero batch, are refused with their names.
        try Data(#"{"dataDirectory": "\#(folder)/from-file", "pushesInFlight": 100, "pushBatchSize": 200}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let tooLarge = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(tooLarge.status != 0)
        #expect(
            tooLarge.error.contains("pushBatchSize (200) must not exceed pushesInFlight (100)"),
            "\(tooLarge.error)"
        )
        try Data(#"{"dataDirectory": "\#(folder)/from-file", "pushBatchSize": 0}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let zero = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(zero.status != 0)
        #expect(zero.error.contains("BROKER_PUSH_BATCH must be within 1...1000"), "\(zero.error)")
        // An APNs signing key from the environment needs its team, key id and file together.
        let partial = try await BrokerProcess.run(
            ["tenant", "list", "--data-dir", folder + "/from-file"],
            dataDirectory: none,
            environment: ["BROKER_APNS_TEAM_ID": "TEAM000001", "BROKER_APNS_KEY_FILE": "/run/secrets/apns.p8"]
        )
        #expect(partial.status != 0)
        #expect(
            partial.error.contains("BROKER_APNS_TEAM_ID, BROKER_APNS_KEY_ID and BROKER_APNS_KEY_FILE go together"),
            "\(partial.error)"
        )
    }

    @Test("Operators, erasure and export from the command line: the admin API's rules, audited as cli")
    func administrationCommands() async throws {
        let data = TestBroker.temporaryDirectory()
        func run(
            _ arguments: [String],
            stdin: String? = nil
        ) async throws -> (status: Int32, output: String, error: String) {
            try await BrokerProcess.run(arguments, dataDirectory: data, stdin: stdin)
        }
        #expect(try await run(["tenant", "create", "acme"]).status == 0)
        #expect(try await run(["tenant", "create", "globex"]).status == 0)
        #expect(try await run(["operator", "add", "ops", "--password-stdin"], stdin: "0ps-secret\n").status == 0)
        let badName = try await run(["operator", "add", "Ops Team", "--password-stdin"], stdin: "x\n")
        #expect(badName.status != 0 && badName.error.contains("operator name"), "\(badName.error)")
        #expect(try await run(["operator", "list"]).output == "ops\n")
        #expect(try await run(["user", "add", "acme", "dave", "--password-stdin"], stdin: "d4ve\n").status == 0)
        // Learned delivery times: the tenant's setting, a user's learned time and opt-in, the admin API's rules.
        let learning = try await run([
            "tenant", "update", "acme", "--learned-timing", "on", "--learned-window", "120", "--learned-holdout", "0",
        ])
        #expect(learning.output.contains("learned times on (window 120 min, holdout 0%)"), "\(learning.output)")
        let badWindow = try await run(["tenant", "update", "acme", "--learned-window", "5"])
        #expect(badWindow.status != 0 && badWindow.error.contains("30-360"), "\(badWindow.error)")
        let shown = try await run(["user", "learned-time", "acme", "dave"])
        #expect(shown.status == 0 && shown.output.contains("dave: not planned yet"), "\(shown.output) \(shown.error)")
        let optedIn = try await run(["user", "learned-time", "acme", "dave", "--opt-in"])
        #expect(optedIn.output.contains("(opted in)"), "\(optedIn.output) \(optedIn.error)")
        let export = try await run(["user", "export", "acme", "dave"])
        #expect(export.status == 0 && export.output.contains("\"username\" : \"dave\""), "\(export.output)")
        #expect(export.output.contains("\"optedIn\" : true"), "\(export.output)")
        #expect(!export.output.contains("$2"))
        let deleted = try await run(["user", "delete", "acme", "dave"])
        #expect(deleted.status == 0 && deleted.output.contains("deleted dave"), "\(deleted.error)")
        #expect(try await run(["user", "delete", "acme", "dave"]).status != 0)
        #expect(try await run(["tenant", "update", "acme", "--suspend"]).output.contains("suspended"))
        let unconfirmed = try await run(["tenant", "delete", "globex"])
        #expect(unconfirmed.status != 0 && unconfirmed.error.contains("confirm=globex"), "\(unconfirmed.error)")
        #expect(try await run(["tenant", "delete", "globex", "--confirm", "globex"]).status == 0)
        #expect(
            try await run(["tenant", "list"]).output
                == "acme\tacme\tEN\tEurope/Berlin\tcom.example.impulse\tend-of-day\tsuspended\n"
        )
        // Each write above is in the trail, newest first, as the command line's.
        let actions = try await run(["audit"]).output.split(separator: "\n").map {
            $0.split(separator: "\t").map(String.init)
        }
        #expect(
            actions.map { $0[4] } == [
                "tenant.delete", "tenant.suspend", "user.delete", "user.export", "user.learned-time.opt-in",
                "tenant.update", "user.create", "operator.create", "tenant.create", "tenant.create",
            ],
            "\(actions)"
        )
        #expect(actions.allSatisfy { $0[1] == "cli" && $0[2] == "operator" })
        #expect(try await run(["audit", "--tenant", "acme"]).output.split(separator: "\n").count == 7)
    }

    @Test("database takes a PostgreSQL URL: admin commands use it; a bad URL or an unreadable password file is refused")
    func postgresDatabase() async throws {
        let none: String? = nil
        let folder = TestBroker.temporaryDirectory()
        let config = folder + "/broker.json"
        let url = try await PostgresTestDatabases.make() + "?sslmode=disable"
        try "unused\n".write(toFile: folder + "/password", atomically: true, encoding: .utf8)
        try Data(
            #"{"dataDirectory": "\#(folder)/data", "database": "\#(url)", "databasePasswordFile": "\#(folder)/password"}"#
                .utf8
        ).write(to: URL(fileURLWithPath: config))
        let created = try await BrokerProcess.run(["tenant", "create", "pg", "--config", config], dataDirectory: none)
        #expect(created.status == 0, "\(created.error)")
        #expect(
            try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none).output.hasPrefix(
                "pg\t"
            )
        )
        // Nothing went to a SQLite file: the tenant is in PostgreSQL.
        #expect(!FileManager.default.fileExists(atPath: folder + "/data/broker.sqlite"))
        let store = try await PostgresStore(
            configuration: try PostgresStoreConfiguration(url: url),
            logger: TestBroker.logger
        )
        #expect(try await store.tenants().map(\.id.rawValue) == ["pg"])
        await store.close()

        try Data(#"{"database": "postgres://db.internal/impulse"}"#.utf8).write(to: URL(fileURLWithPath: config))
        let noUser = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(noUser.status != 0 && noUser.error.contains("names no user"), "\(noUser.error)")
        try Data(#"{"database": "\#(url)", "databasePasswordFile": "\#(folder)/missing"}"#.utf8)
            .write(to: URL(fileURLWithPath: config))
        let missing = try await BrokerProcess.run(["tenant", "list", "--config", config], dataDirectory: none)
        #expect(missing.status != 0)
        #expect(missing.error.contains("cannot read the database password file"), "\(missing.error)")
    }

    @Test("broker demo resumes a seed cut between its users and their devices: every demo user gets a device")
    func demoResumesSeed() async throws {
        let data = TestBroker.temporaryDirectory()
        // What a kill after the users' transaction and before the devices' left behind.
        let store = try await SQLiteStore(
            configuration: .init(path: data + "/broker.sqlite"),
            logger: TestBroker.logger
        )
        let demo = try TenantID("demo")
        try await store.createTenant(try Tenant(id: demo, name: "Demo Company", apnsTopic: "com.example.impulse"))
        let anna = try await store.createUser(try NewUser(tenant: demo, username: "anna", passwordHash: "x"))
        #expect(try await store.devices(tenant: demo, owner: anna.id).isEmpty)
        let running = try RunningBroker(
            ["demo", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "notice", "--users", "3"],
            environment: ["BROKER_ADMIN_LISTEN": "off"]
        )
        _ = try #require(try await running.port(matching: /https:\/\/localhost:(\d+)/), "\(running.output)")
        #expect(await running.stop() == 0)
        let users = try await store.users(tenant: demo)
        #expect(users.count == 8)  // anna, ben, chen, dora, eli and user001-003
        for user in users {
            let devices = try await store.devices(tenant: demo, owner: user.id)
            #expect(devices.count == 1, "\(user.username)")
            // FCM is on with the embedded default: ben and dora carry Android phones, anna an iPhone.
            if ["ben", "dora"].contains(user.username) { #expect(devices.first?.channel == .fcm, "\(user.username)") }
            if user.username == "anna" { #expect(devices.first?.channel == .apns) }
        }
    }

    @Test("broker demo seeds once, dispatches at once, stops on SIGTERM, and restarts without duplicates")
    func demoRestarts() async throws {
        let data = TestBroker.temporaryDirectory()
        var seen: [String] = []
        for run in 0..<2 {
            let demo = try RunningBroker(
                ["demo", "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "notice", "--users", "20"],
                environment: [
                    "BROKER_SPREAD_SECONDS": "0", "BROKER_ADMIN_LISTEN": "127.0.0.1:0",
                    "BROKER_PUSHES_IN_FLIGHT": "300", "BROKER_PUSH_BATCH": "30",
                ]
            )
            let port = try #require(try await demo.port(matching: /https:\/\/localhost:(\d+)/), "\(demo.output)")
            // The push limits from the environment reach the gateway: the operator's /inspect shows them.
            let adminPort = try #require(
                try await demo.port(matching: /Metrics: curl http:\/\/127\.0\.0\.1:(\d+)\/metrics/),
                "\(demo.output)"
            )
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let response = try await client.execute(
                HTTPClientRequest(url: "http://127.0.0.1:\(adminPort)/inspect"),
                timeout: .seconds(10)
            )
            let inspect = Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
            try await client.shutdown()
            let limits = (try JSONSerialization.jsonObject(with: inspect) as? [String: Any])?["pushLimits"]
            #expect(
                limits as? [String: Int] == ["inFlight": 300, "batch": 30],
                "\(String(decoding: inspect, as: UTF8.self))"
            )
            // anna's delivery time is the minute the demo was first started: her impulse arrives at once.
            let items = Mutex<[String]>([])
            let arrived = try await eventually(seconds: 20) {
                try await TestBroker.probe(port: port, directory: data) { reply in
                    let ids = (reply.json["items"] as? [[String: Any]] ?? []).compactMap { $0["workingID"] as? String }
                    items.withLock { $0 = ids }
                }
                return !items.withLock { $0 }.isEmpty
            }
            #expect(arrived, "\(demo.output)")
            if run == 1 { #expect(items.withLock { $0 } == seen) }  // nothing twice after the restart
            seen = items.withLock { $0 }
            #expect(seen.count == 1)
            #expect(try await eventually { demo.output.contains("dispatch: 25 users") }, "\(demo.output)")
            #expect(await demo.stop() == 0)  // SIGTERM: graceful shutdown, exit status 0
            // The shutdown is logged from start to end (the pipe may deliver the last lines after the exit).
            #expect(try await eventually(seconds: 5) { demo.output.contains(" stopped\n") }, "\(demo.output)")
            #expect(demo.output.contains("shutting down"))
        }
    }
}
