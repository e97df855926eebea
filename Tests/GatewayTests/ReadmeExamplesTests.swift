import Foundation
import TestSupport
import Testing

/// Every `curl` line of the README, run as written against `broker demo` and `broker apns-simulator` processes.
/// Only what a reader's machine would differ in is replaced: the ports (the README's 8443 and 2197) and the
/// simulator's control token (`$T`).
@Suite("README examples", .timeLimit(.minutes(2)))
struct ReadmeExamplesTests {
    struct Example: CustomStringConvertible {
        var command: String
        /// The status the README shows for it (a problem body's `status`), else any 2xx.
        var expectedStatus: Int?
        var description: String { command }
    }

    static var readme: String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)) ?? ""
    }

    /// The `curl` commands of the README's shell blocks, continuation lines joined, comments removed.
    static func examples(_ text: String) -> [Example] {
        var examples: [Example] = []
        var inShell = false
        var pending: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                inShell = line == "```sh" && !inShell
                pending = nil
                continue
            }
            guard inShell else { continue }
            var code = line.trimmingCharacters(in: .whitespaces)
            if code.hasPrefix("$ ") { code.removeFirst(2) }
            if let started = pending {
                let joined = started + " " + stripComment(code)
                if joined.hasSuffix("\\") {
                    pending = String(joined.dropLast())
                } else {
                    examples.append(Example(command: joined))
                    pending = nil
                }
                continue
            }
            if code.hasPrefix("curl ") {
                let command = stripComment(code)
                if command.hasSuffix("\\") {
                    pending = String(command.dropLast())
                } else {
                    examples.append(Example(command: command))
                }
            } else if let last = examples.indices.last, examples[last].expectedStatus == nil,
                let match = line.firstMatch(of: /"status":\s*(\d{3})/), let status = Int(match.1)
            {
                // The answer the README shows under the command.
                examples[last].expectedStatus = status
            }
        }
        return examples
    }

    /// Drops a shell comment (`#` after whitespace, outside quotes) and trailing spaces.
    static func stripComment(_ line: String) -> String {
        var quote: Character?
        var previous: Character = " "
        var kept = ""
        for character in line {
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "#", previous == " " {
                break
            }
            kept.append(character)
            previous = character
        }
        return kept.trimmingCharacters(in: .whitespaces)
    }

    @Test("The README's curl examples run against the demo and the simulator and answer what it says")
    func curlExamples() async throws {
        let examples = Self.examples(Self.readme)
        #expect(examples.count >= 19, "\(examples)")
        let data = TestBroker.temporaryDirectory()
        // The operator listener on a free port: its default, 9090, is another test's demo's while they run at once.
        let operatorToken = "readme-operator-token-0123456789abcdef"
        let demo = try RunningBroker(
            ["demo", "--users", "0", "--listen", "127.0.0.1:0", "--data-dir", data + "/demo"],
            environment: ["BROKER_ADMIN_LISTEN": "127.0.0.1:0", "BROKER_OPERATOR_TOKEN": operatorToken]
        )
        defer { demo.terminate() }
        let simulator = try RunningBroker([
            "apns-simulator", "--listen", "127.0.0.1:0", "--data-dir", data + "/sim", "--log-level", "error",
        ])
        defer { simulator.terminate() }
        let demoPort = try #require(try await demo.port(matching: /https:\/\/localhost:(\d+)/), "\(demo.output)")
        let simulatorPort = try #require(try await simulator.port(matching: #/127\.0\.0\.1:(\d+) /#))
        // anna's impulse of the day is delivered as the demo starts (her delivery time is that minute).
        let delivered = try await eventually(seconds: 30) {
            let answer = try await Self.run(
                "curl --http2 -k -u anna:demo https://localhost:\(demoPort)/CurrentImpulse",
                environment: [:]
            )
            return answer.body.contains("water-first-en")
        }
        #expect(delivered, "\(demo.output)")
        for example in examples {
            let command = example.command
                .replacingOccurrences(of: "https://localhost:8443", with: "https://localhost:\(demoPort)")
                .replacingOccurrences(of: "https://127.0.0.1:2197", with: "https://127.0.0.1:\(simulatorPort)")
            let answer = try await Self.run(
                command,
                environment: [
                    "T": "Authorization: Bearer \(RunningBroker.controlToken)", "BROKER_OPERATOR_TOKEN": operatorToken,
                ]
            )
            if let expected = example.expectedStatus {
                #expect(answer.status == expected, "\(command): \(answer.status) \(answer.body)")
            } else {
                #expect((200..<300).contains(answer.status), "\(command): \(answer.status) \(answer.body)")
            }
        }
    }

    /// Runs a curl command line through `sh`, adding options that report the status and keep quiet.
    static func run(_ command: String, environment: [String: String]) async throws -> (status: Int, body: String) {
        try await offThePool {
            let bodyFile = TestBroker.temporaryDirectory() + "/body"
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command + " -s -o '\(bodyFile)' -w '%{http_code}'"]
            process.environment = ["PATH": "/usr/bin:/bin"].merging(environment) { $1 }
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let status = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let body = (try? String(contentsOfFile: bodyFile, encoding: .utf8)) ?? ""
            return (Int(String(decoding: status, as: UTF8.self)) ?? 0, body)
        }
    }
}
