import ArgumentParser
import Engine
import Foundation
import Gateway
import Simulation

/// `broker-bench`: puts the broker beside its peers on this machine. Prints one JSON object of results, then a
/// readable summary. Timings are measured here and recorded in BENCHMARKS.md, never asserted in tests.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker-bench",
        abstract: "Benchmark the broker end to end over TLS and HTTP/2 on loopback."
    )

    @Option(help: "Users due in the same minute (the daily burst).")
    var users = 1_000_000

    @Option(
        help:
            "Scenarios to run, comma-separated: burst, android-burst, rejections, rest, peer, fcm-peer, outage, restarts, overload, imports, learned-timing, postgres, cluster (the last two only with --database)."
    )
    var scenarios = Self.defaultScenarios

    @Option(help: "CSV rows the imports scenario sends to the admin API's user import.")
    var importRows = 1_000_000

    @Option(
        help:
            "A PostgreSQL server for the postgres scenario: postgres://user@host:port/database (the user creates and drops a database per run; password in BROKER_DATABASE_PASSWORD)."
    )
    var database: String?

    @Option(help: "Node counts the postgres scenario runs the burst with, comma-separated.")
    var nodes = "1,2"

    @Option(help: "Users due at once in the cluster scenario (three nodes; undisturbed, one killed, a rolling stop).")
    var clusterUsers = 1_000_000

    @Option(help: "Seconds the overload scenario offers twice the REST capacity.")
    var overloadSeconds = 20

    @Option(
        help: "REST requests in progress the overload scenario's broker admits (its default: 512; 1000000: no bound)."
    )
    var overloadLimit = AdmissionLimits().node

    @Option(help: "Users due in the restarts scenario (broker serve killed every --kill-every seconds).")
    var restartUsers = 100_000

    @Option(help: "Seconds between the SIGKILLs of the restarts scenario.")
    var killEvery = 2.0

    @Option(help: "APNs outages to measure, in seconds, comma-separated (each refused, then answering 503).")
    var outages = "5,8,31"

    @Option(help: "Requests h2load sends to measure the simulator's ceiling and the REST rate.")
    var requests = 200_000

    @Option(help: "Pushes the peer client (aioapns) and the gateway alone send in the peer comparison.")
    var peerPushes = 20_000

    @Option(help: "Rounds of the gateway-alone measurement (its median is the result).")
    var gatewayRounds = 3

    @Option(help: "Median of the latency the simulator adds to every answer, in milliseconds (0: none).")
    var apnsLatencyMs = 0.0

    @Option(help: "Spread of that latency: the standard deviation of its logarithm (0.5: p99 = 3.2 x median).")
    var apnsLatencySpread = 0.0

    @Option(help: "Deliveries a gateway worker takes at once (the gateway's batch size).")
    var gatewayBatch = PushGatewayConfiguration().batchSize

    @Option(help: "Pushes the gateway keeps in flight at once.")
    var gatewayWorkers = PushGatewayConfiguration().workers

    @Flag(inversion: .prefixedNo, help: "Run aioapns in the peer scenario (without it: the gateway alone).")
    var peerClient = true

    @Option(
        help:
            "A Python with firebase-admin \(FCMPeer.firebaseAdmin) for the fcm-peer scenario (without it, one is made in .build/firebase-venv from PyPI)."
    )
    var firebasePython = ".build/firebase-venv/bin/python3"

    static let defaultScenarios =
        "burst,android-burst,rejections,rest,peer,fcm-peer,outage,restarts,overload,imports,postgres,cluster,learned-timing"

    @Option(
        help: "Simulated readers per world in the learned-timing scenario (60 days through the scheduler and ledger)."
    )
    var timingReaders = 600

    @Option(
        help:
            "Seeds of the learned-timing scenario's worlds, comma-separated (the constants were chosen on seeds 1-3; 101 and up are held out)."
    )
    var timingSeeds = "101,102"

    @Option(
        help:
            "Reader-world families of the learned-timing scenario, comma-separated, or all (original, the world the first model was tuned in, and the independent ones)."
    )
    var timingFamilies = "all"

    @Option(
        help:
            "The model's constants to try in the learned-timing scenario, name=value comma-separated (window, step, minimum, apart, prior, exploration, smoothing, late, skipped, halfLife)."
    )
    var timingModel = ""

    @Flag(help: "The learned-timing scenario asks the model directly, without the scheduler and ledger (fast).")
    var timingModelAlone = false

    @Flag(help: "A small size for CI: every scenario runs, the numbers mean nothing.")
    var smoke = false

    @Option(
        help:
            "Folder for the stores and logs, kept afterwards (default: a new temporary folder, removed after a run that succeeds)."
    )
    var workDirectory: String?

    func run() async throws {
        let work = workDirectory ?? NSTemporaryDirectory() + "broker-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        // A full run's folder holds 1.3 GB (two stores of a million users): a temporary one goes once the results
        // are out. After a failure it stays, for its logs. (This runs after the simulator's stop, declared below.)
        var finished = false
        defer {
            if workDirectory == nil, finished {
                try? FileManager.default.removeItem(atPath: work)
            } else if !finished {
                FileHandle.standardError.write(
                    Data("broker-bench: the stores and logs of this run are in \(work)\n".utf8)
                )
            }
        }
        let size =
            smoke
            ? Size(users: 2000, requests: 2000, peerPushes: 500)
            : Size(users: users, requests: requests, peerPushes: peerPushes)
        var wanted = Set(scenarios.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) })
        if database == nil {
            guard wanted.isDisjoint(with: ["postgres", "cluster"]) || scenarios == Self.defaultScenarios else {
                throw ValidationError("the postgres and cluster scenarios need --database postgres://...")
            }
            wanted.remove("postgres")
            wanted.remove("cluster")
        }
        let gateway = PushGatewayConfiguration(
            queueCapacityPerTenant: 10_000,
            workers: gatewayWorkers,
            batchSize: gatewayBatch
        )
        var results: [String: Any] = [
            "machine": Machine.describe(), "binaries": Machine.binaries(), "size": size.json, "smoke": smoke,
            "conditions": [
                "apnsLatencyMilliseconds": apnsLatencyMs, "apnsLatencySpread": apnsLatencySpread,
                "gatewayBatch": gateway.batchSize, "gatewayWorkers": gateway.workers,
            ],
        ]
        let simulator = try await SimulatorProcess.start(
            work: work + "/sim",
            latency: (max(0, apnsLatencyMs), max(0, apnsLatencySpread))
        )
        defer { simulator.stop() }
        results["simulatorCeiling"] = try H2Load.simulatorCeiling(simulator, requests: size.requests, work: work)
        if wanted.contains("burst") {
            results["burst"] = try await Burst.run(
                users: size.users,
                deadPercent: 0,
                gateway: gateway,
                simulator: simulator,
                work: work + "/burst"
            )
        }
        if wanted.contains("android-burst") {
            results["androidBurst"] = try await Burst.run(
                users: size.users,
                deadPercent: 0,
                androidPercent: 50,
                gateway: gateway,
                simulator: simulator,
                work: work + "/android-burst"
            )
            if let clean = results["burst"] as? [String: Any], let mixed = results["androidBurst"] as? [String: Any] {
                // Target: half the users on Android within 1.25 times the all-APNs burst of the same run.
                results["androidBurstAgainstBurst"] =
                    (mixed["secondsToLastAnswer"] as? Double ?? 0)
                    / max(0.001, clean["secondsToLastAnswer"] as? Double ?? 0)
            }
        }
        if wanted.contains("rejections") {
            results["rejections"] = try await Burst.run(
                users: size.users,
                deadPercent: 30,
                gateway: gateway,
                simulator: simulator,
                work: work + "/rejections"
            )
        }
        if let clean = results["burst"] as? [String: Any], let dead = results["rejections"] as? [String: Any] {
            // The target compares valid pushes per second. While the scheduler sets the pace that is at most 0.7
            // (only 70% of the users have a valid token), so users per second are given beside it.
            func ratio(_ key: String) -> Double {
                (dead[key] as? Double ?? 0) / max(0.001, clean[key] as? Double ?? 0)
            }
            results["rejectionsAgainstClean"] = [
                "validPushesPerSecond": ratio("acceptedPerSecond"), "usersPerSecond": ratio("deliveriesPerSecond"),
            ]
        }
        if wanted.contains("rest") {
            results["rest"] = try await RestLoad.run(requests: size.requests, work: work + "/rest")
        }
        if wanted.contains("peer") {
            results["peer"] = try await Peer.run(
                pushes: size.peerPushes,
                rounds: smoke ? 1 : gatewayRounds,
                withClient: peerClient,
                gateway: gateway,
                simulator: simulator,
                work: work + "/peer"
            )
        }
        if wanted.contains("fcm-peer") {
            results["fcmPeer"] = try await FCMPeer.run(
                pushes: size.peerPushes,
                rounds: smoke ? 1 : gatewayRounds,
                python: firebasePython,
                gateway: gateway,
                simulator: simulator,
                work: work + "/fcm-peer"
            )
        }
        if wanted.contains("outage") {
            results["outage"] = try await Outage.run(
                seconds: smoke ? [1] : outages.split(separator: ",").compactMap { Int($0) },
                pushes: smoke ? 50 : 1000,
                work: work + "/outage"
            )
        }
        if wanted.contains("overload") {
            results["overload"] = try await Overload.run(
                requests: size.requests,
                seconds: smoke ? 2 : overloadSeconds,
                limits: AdmissionLimits(node: overloadLimit, perTenant: overloadLimit / 2),
                work: work + "/overload"
            )
        }
        if wanted.contains("imports") {
            results["imports"] = try await Imports.run(rows: smoke ? 20_000 : importRows, work: work + "/imports")
        }
        if wanted.contains("restarts") {
            results["restarts"] = try await Restarts.run(
                users: smoke ? 2000 : restartUsers,
                killEvery: .milliseconds(Int64(killEvery * 1000)),
                simulator: simulator,
                work: work + "/restarts"
            )
        }
        if wanted.contains("postgres"), let database {
            var runs: [[String: Any]] = []
            for count in nodes.split(separator: ",").compactMap({ Int($0) }) where count > 0 {
                runs.append(
                    try await SharedBurst.run(
                        server: database,
                        users: size.users,
                        nodes: count,
                        simulator: simulator,
                        work: work + "/postgres-\(count)"
                    )
                )
            }
            results["postgres"] = runs
            func seconds(_ nodes: Int) -> Double? {
                runs.first { $0["nodes"] as? Int == nodes }?["secondsToLastPush"] as? Double
            }
            let sqlite = (results["burst"] as? [String: Any])?["secondsToLastAnswer"] as? Double
            var against: [String: Any] = [:]
            if let one = seconds(1), let sqlite { against["oneNode"] = one / sqlite }
            if let one = seconds(1), let two = seconds(2) { against["twoNodesAgainstOne"] = two / one }
            results["postgresAgainstSQLite"] = against
        }
        if wanted.contains("cluster"), let database {
            results["cluster"] = try await ClusterRoll.run(
                server: database,
                users: smoke ? 3000 : clusterUsers,
                simulator: simulator,
                work: work + "/cluster"
            )
        }
        if wanted.contains("learned-timing") {
            results["learnedTiming"] = try await LearnedTimingScenario.run(
                families: smoke
                    ? ["session"]
                    : timingFamilies == "all"
                        ? ["original"] + ReaderWorlds.families : timingFamilies.split(separator: ",").map(String.init),
                readers: smoke ? 100 : timingReaders,
                days: smoke ? 24 : 60,
                seeds: smoke ? [101] : timingSeeds.split(separator: ",").compactMap { UInt64($0) },
                model: try LearnedTiming(constants: timingModel),
                modelAlone: timingModelAlone,
                work: work + "/learned-timing"
            )
        }
        let data = try JSONSerialization.data(withJSONObject: results, options: [.sortedKeys, .prettyPrinted])
        FileHandle.standardOutput.write(data)
        FileHandle.standardOutput.write(Data("\n\n".utf8))
        FileHandle.standardOutput.write(Data(Summary.text(results).utf8))
        finished = true
    }
}

struct Size {
    var users: Int
    var requests: Int
    var peerPushes: Int
    var json: [String: Int] { ["users": users, "requests": requests, "peerPushes": peerPushes] }
}

enum Machine {
    static func describe() -> [String: Any] {
        let memory =
            (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("MemTotal:") }.map(String.init) ?? "unknown"
        let model =
            (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown"
        return ["cores": ProcessInfo.processInfo.activeProcessorCount, "memory": memory, "cpu": model]
    }

    /// When this benchmark's binary and the simulator's (`broker`, beside it) were built. `swift build -c release
    /// --product broker-bench` leaves an older `broker` in place, and the simulator then runs old code: a
    /// simulator older than the benchmark by more than ten minutes gets a warning (false when only the
    /// benchmark's own sources changed).
    static func binaries() -> [String: Any] {
        func modified(_ path: String) -> Date? {
            (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
        }
        let bench = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let simulator = SimulatorProcess.brokerBinary
        let format = ISO8601DateFormatter()
        guard let benchBuilt = modified(bench), let simulatorBuilt = modified(simulator) else {
            return ["benchmark": bench, "simulator": simulator]
        }
        if simulatorBuilt < benchBuilt.addingTimeInterval(-600) {
            FileHandle.standardError.write(
                Data(
                    ("warning: the simulator binary \(simulator) is older than \(bench); unless only the "
                        + "benchmark's sources changed, build both (swift build -c release)\n").utf8
                )
            )
        }
        return [
            "benchmark": bench, "benchmarkBuilt": format.string(from: benchBuilt), "simulator": simulator,
            "simulatorBuilt": format.string(from: simulatorBuilt),
        ]
    }

    /// CPU time (user and system) a process has used so far, in seconds, from `/proc/<pid>/stat` (10 ms
    /// resolution); nil for a process that is gone. The benchmark's results give CPU per push beside the rates: on
    /// this shared 2-core machine both spread by up to a third for identical code, but the broker's CPU divided by
    /// the simulator's (which does the same work in every clean run) cancels most of the machine's mood.
    static func cpuSeconds(pid: Int32? = nil) -> Double? {
        let path = pid.map { "/proc/\($0)/stat" } ?? "/proc/self/stat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm)": state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU time so far of every process whose command is `command` (a database server and its backends), by pid.
    static func cpuSeconds(command: String) -> [Int32: Double] {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var times: [Int32: Double] = [:]
        for pid in folders.compactMap(Int32.init) {
            let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if name == command, let seconds = cpuSeconds(pid: pid) { times[pid] = seconds }
        }
        return times
    }

    /// The CPU those processes used between two readings: what each process alive at the end used since the first
    /// (all of it for a process started since). A process that ended in between is not counted.
    static func cpuSeconds(since start: [Int32: Double], until end: [Int32: Double]) -> Double {
        end.reduce(0) { $0 + $1.value - (start[$1.key] ?? 0) }
    }

    /// Peak resident set size (VmHWM) of this process since the last reset, or of another process, in bytes; 0
    /// for a process that is gone.
    static func peakRSS(pid: Int32? = nil) -> Int {
        let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs), so a phase's peak excludes setup.
    /// The resident set now (VmRSS).
    static func residentRSS() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    static func resetPeakRSS() {
        if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            handle.write(Data("5".utf8))
            try? handle.close()
        }
    }
}

/// Runs a program to completion and returns its standard output (and error, appended).
func runProgram(_ path: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

func which(_ program: String) -> String? {
    for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(folder)/\(program)"
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}
