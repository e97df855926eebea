import Foundation
import Gateway

/// Scenario 9: a user import of a million CSV rows through the admin API (issue 32, item 5), over HTTP/2 with
/// curl, the body read as it arrives. Every row names a new user with a bcrypt `passwordHash` (no hashing in the
/// broker). The result: the broker's resident memory before and at its peak (it runs in this process), the time,
/// the rows written, and the size of the answer.
enum Imports {
    static let token = "bench-operator-token-0123456789abcdef"

    static func run(rows: Int, work: String) async throws -> [String: Any] {
        guard let curl = which("curl") else { throw BenchError("curl is missing (scripts/setup installs it)") }
        let (app, port, running) = try await RestLoad.startBroker(work: work) {
            $0.rest.operatorToken = Self.token
            // A million rows of 70-odd bytes are more than the default 64 MiB.
            $0.rest.maxUploadSize = 256 << 20
            $0.rest.uploadDeadline = .seconds(3_600)
        }
        defer { running.cancel() }
        let file = work + "/users.csv"
        let hash = try await Authenticator.hash("imported", cost: 4)
        FileManager.default.createFile(atPath: file, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        try handle.write(contentsOf: Data("username,passwordHash,language\n".utf8))
        for start in stride(from: 0, to: rows, by: 10_000) {
            let lines = (start..<min(rows, start + 10_000)).map { "imported-\($0),\(hash),EN\n" }.joined()
            try handle.write(contentsOf: Data(lines.utf8))
        }
        try handle.close()
        let bytes = (try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        let before = Machine.residentRSS()
        Machine.resetPeakRSS()
        let started = ContinuousClock.now
        let status = try runProgram(
            curl,
            [
                "-sk", "--http2", "-o", work + "/answer.json", "-w", "%{http_code}",
                "-H", "Authorization: Bearer \(Self.token)", "-H", "Content-Type: text/csv",
                "--data-binary", "@" + file, "https://127.0.0.1:\(port)/t/rest/admin/v1/user-imports",
            ]
        )
        let elapsed = started.duration(to: .now)
        let peak = Machine.peakRSS()
        let answer = (try? Data(contentsOf: URL(fileURLWithPath: work + "/answer.json"))) ?? Data()
        let report = (try? JSONSerialization.jsonObject(with: answer)) as? [String: Any] ?? [:]
        await app.shutdown()
        _ = await running.result
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        guard status == "200", report["created"] as? Int == rows else {
            throw BenchError("the import answered \(status): \(String(decoding: answer.prefix(300), as: UTF8.self))")
        }
        return [
            "rows": rows, "bodyMiB": Double(bytes) / 1_048_576, "seconds": seconds,
            "rowsPerSecond": Double(rows) / max(seconds, 0.001), "created": report["created"] as? Int ?? 0,
            "answerBytes": answer.count, "listedRows": (report["rows"] as? [Any])?.count ?? 0,
            "rssBeforeMiB": Double(before) / 1_048_576, "peakRSSMiB": Double(peak) / 1_048_576,
        ]
    }
}
