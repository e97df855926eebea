import Foundation

/// Runs h2load and reads its summary and per-request log.
enum H2Load {
    static func path() throws -> String {
        guard let path = which("h2load") else { throw BenchError("h2load is missing: apt-get install nghttp2-client") }
        return path
    }

    struct Run {
        var requestsPerSecond: Double
        var succeeded: Int
        var failed: Int
        var seconds: Double
        var latenciesMicroseconds: [Int]
    }

    /// Starts h2load; `finish` waits for it and parses the result.
    static func start(_ arguments: [String], logFile: String) throws -> () throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try path())
        process.arguments = arguments + ["--log-file=\(logFile)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        return {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let text = String(decoding: data, as: UTF8.self)
            guard let finished = text.firstMatch(of: #/finished in ([0-9.]+)(ms|s), ([0-9.]+) req\/s/#),
                let requests = text.firstMatch(
                    of: #/requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed/#
                )
            else { throw BenchError("h2load: \(text.suffix(600))") }
            let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
            let latencies = log.split(separator: "\n").compactMap { line in
                line.split(separator: "\t").last.flatMap { Int($0) }
            }
            return Run(
                requestsPerSecond: Double(finished.3) ?? 0,
                succeeded: Int(requests.1) ?? 0,
                failed: Int(requests.2) ?? 0,
                seconds: (Double(finished.1) ?? 0) / (finished.2 == "ms" ? 1000 : 1),
                latenciesMicroseconds: latencies
            )
        }
    }

    /// Several h2load processes at once (one per user or URL), summed.
    static func parallel(_ runs: [[String]], work: String, name: String) throws -> [String: Any] {
        let finishers = try runs.enumerated().map { index, arguments in
            try start(arguments, logFile: "\(work)/\(name)-\(index).log")
        }
        let results = try finishers.map { try $0() }
        let latencies = results.flatMap(\.latenciesMicroseconds).sorted()
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            return Double(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]) / 1000
        }
        return [
            "requestsPerSecond": results.map(\.requestsPerSecond).reduce(0, +),
            "succeeded": results.map(\.succeeded).reduce(0, +),
            "failed": results.map(\.failed).reduce(0, +),
            "p50Milliseconds": percentile(0.5),
            "p99Milliseconds": percentile(0.99),
        ]
    }

    /// The simulator's own ceiling: h2load POSTing push-sized requests to it, as the broker would.
    static func simulatorCeiling(_ simulator: SimulatorProcess, requests: Int, work: String) throws -> [String: Any] {
        let payload = work + "/payload.json"
        try #"{"aps":{"alert":{"title":"Impulse 1"},"badge":1},"impulse":"impulse-1"}"#
            .write(toFile: payload, atomically: true, encoding: .utf8)
        let token = String(format: "%064llx", UInt64(1) &* 0x9E37_79B9_7F4A_7C15)
        return try parallel(
            [
                [
                    "-n", "\(requests)", "-c", "4", "-m", "100", "-t", "1", "-d", payload,
                    "-H", "apns-topic: \(Burst.topic)", "-H", "apns-push-type: alert",
                    "https://127.0.0.1:\(simulator.port)/3/device/\(token)",
                ]
            ],
            work: work,
            name: "h2load-simulator"
        )
    }
}
