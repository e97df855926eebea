import Foundation
import Gateway

/// Scenario 7: authenticated `GET /CurrentImpulse` offered at twice what the broker answers (issue 20, item
/// 10). The capacity is measured first (h2load, closed loop); then h2load offers twice that rate, open loop
/// (`--rps` per connection), for a fixed time. The result: the rate and latency of the requests admitted (200), the
/// share refused at once (503 `overloaded`, 429 `tenant-over-share`), and the process's peak memory.
enum Overload {
    static func run(requests: Int, seconds: Int, limits: AdmissionLimits, work: String) async throws -> [String: Any] {
        let (app, port, running) = try await RestLoad.startBroker(work: work) { $0.rest.admission = limits }
        defer { running.cancel() }
        let url = "https://127.0.0.1:\(port)/CurrentImpulse"
        func authorization(_ user: Int) -> [String] {
            ["-H", "authorization: Basic " + Data("u\(user):pw".utf8).base64EncodedString()]
        }
        let users = 1...RestLoad.users
        // Warm the credential cache, then measure the capacity with enough streams in flight to saturate.
        _ = try H2Load.parallel(
            users.map { ["-n", "20", "-c", "1", "-m", "1", "-t", "1"] + authorization($0) + [url] },
            work: work,
            name: "overload-warm"
        )
        let capacity = try H2Load.parallel(
            users.map {
                ["-n", "\(max(1, requests / RestLoad.users))", "-c", "4", "-m", "25", "-t", "1"] + authorization($0) + [
                    url
                ]
            },
            work: work,
            name: "overload-capacity"
        )
        let capacityRate = capacity["requestsPerSecond"] as? Double ?? 0
        // Twice that, open loop: 16 connections per user, each sending at its share of the rate however slowly the
        // answers come (up to 100 streams each, the server's limit).
        let connections = 16 * RestLoad.users
        let offered = 2 * capacityRate
        let perConnection = max(1, Int((offered / Double(connections)).rounded()))
        Machine.resetPeakRSS()
        let finishers = try users.map { user in
            try H2Load.start(
                [
                    "-c", "16", "-m", "100", "-t", "1", "--rps", "\(perConnection)", "-D", "\(seconds)",
                ] + authorization(user) + [url],
                logFile: "\(work)/overload-\(user).log"
            )
        }
        for finish in finishers { _ = try? finish() }
        let peak = Machine.peakRSS()
        await app.shutdown()
        _ = await running.result
        // Per request: start (us since the epoch), status, microseconds to the end of the answer.
        var admitted: [Int] = []
        var statuses: [Int: Int] = [:]
        for user in users {
            let log = (try? String(contentsOfFile: "\(work)/overload-\(user).log", encoding: .utf8)) ?? ""
            for line in log.split(separator: "\n") {
                let columns = line.split(separator: "\t")
                guard columns.count >= 3, let status = Int(columns[1]), let micros = Int(columns[2]) else { continue }
                statuses[status, default: 0] += 1
                if status == 200 { admitted.append(micros) }
            }
        }
        admitted.sort()
        let total = statuses.values.reduce(0, +)
        let refused = (statuses[503] ?? 0) + (statuses[429] ?? 0)
        func percentile(_ p: Double) -> Double {
            guard !admitted.isEmpty else { return 0 }
            return Double(admitted[min(admitted.count - 1, Int(Double(admitted.count) * p))]) / 1000
        }
        return [
            "admissionLimits": ["node": limits.node, "perTenant": limits.perTenant],
            "capacityRequestsPerSecond": capacityRate,
            "capacityP99Milliseconds": capacity["p99Milliseconds"] as? Double ?? 0,
            "offeredRequestsPerSecond": Double(perConnection * connections),
            "seconds": seconds,
            "answered": total,
            "admittedPerSecond": Double(admitted.count) / Double(max(1, seconds)),
            "admittedP50Milliseconds": percentile(0.5),
            "admittedP99Milliseconds": percentile(0.99),
            "refusedShare": Double(refused) / Double(max(1, total)),
            "statuses": Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), $0.value) }),
            "peakResidentBytes": peak,
        ]
    }
}
