import Crypto
import Engine
import Foundation
import Gateway
import TestSupport
import Testing

/// The alert rules (deploy/prometheus/alerts.yml) judged on what a running broker exports: each scenario drives a
/// test broker into a state, scrapes its real `/metrics` once per simulated minute, and hands the series to
/// `promtool test rules` with the alerts that must (or must not) fire. Issue 44: the shipped rules were tested on
/// label sets written by hand, one of which the broker never emits, and missed a tenant's outage.
@Suite("Alert rules on real scrapes", .timeLimit(.minutes(5)))
struct AlertScrapeTests {
    /// Scrapes, a minute apart in the rules' time, as Prometheus would record them (with `up`, `job`, `instance`).
    final class Timeline: @unchecked Sendable {
        // Only touched by the test's own task.
        private(set) var series: [String: [Int: Double]] = [:]
        private(set) var minutes = 0
        /// Every metric name with the label keys it was seen with (for checking hand-written tests).
        private(set) var shapes: [String: Set<[String]>] = [:]

        /// Adds one scrape per instance, at the next minute. Timestamps (`*_timestamp_seconds`) keep their age:
        /// the rules' clock starts at 0, the scrape's at its wall time.
        func scrape(_ texts: [String: String]) {
            let wall = Date().timeIntervalSince1970
            let now = Double(minutes * 60)
            for (instance, text) in texts {
                series["up{instance=\"\(instance)\",job=\"impulse-broker\"}", default: [:]][minutes] = 1
                for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                    guard let space = line.lastIndex(of: " "), var value = Double(line[line.index(after: space)...])
                    else { continue }
                    let sample = String(line[..<space])
                    let name = String(sample.prefix { $0 != "{" })
                    var labels = Self.labels(sample)
                    shapes[name, default: []].insert(labels.map(\.key).sorted())
                    labels["job"] = "impulse-broker"
                    labels["instance"] = instance
                    if name.hasSuffix("_timestamp_seconds") { value = value - wall + now }
                    let key =
                        name + "{"
                        + labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }
                        .joined(separator: ",") + "}"
                    series[key, default: [:]][minutes] = value
                }
            }
            minutes += 1
        }

        static func labels(_ sample: String) -> [String: String] {
            guard let open = sample.firstIndex(of: "{"), sample.hasSuffix("}") else { return [:] }
            var labels: [String: String] = [:]
            let body = sample[sample.index(after: open)..<sample.index(before: sample.endIndex)]
            for pair in body.matches(of: /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/) {
                labels[String(pair.1)] = String(pair.2)
            }
            return labels
        }

        /// promtool's `input_series`: each series' value per minute, `_` where a scrape did not have it.
        var inputSeries: String {
            series.keys.sorted().map { key in
                let values = (0..<minutes).map { series[key]?[$0].map { String(format: "%.17g", $0) } ?? "_" }
                let escaped = key.replacingOccurrences(of: "'", with: "''")
                return "      - series: '\(escaped)'\n        values: '\(values.joined(separator: " "))'"
            }.joined(separator: "\n")
        }
    }

    /// What one alert must do at one evaluation time: fire with exactly these label sets (none: stay quiet).
    struct Expectation {
        var alert: String
        var minute: Int
        var firing: [[String: String]]
    }

    static var rules: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/prometheus/alerts.yml").path
    }

    /// Runs `promtool test rules` on the timeline. Who fires is read from the `ALERTS` series the rules produce
    /// (their labels, not their annotations: alerts.test.yml checks those).
    static func promtool(_ timeline: Timeline, _ expectations: [Expectation]) throws -> (ok: Bool, output: String) {
        let folder = TemporaryDirectories.make("alert-scrape-")
        var tests = "rule_files: ['\(rules)']\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n"
        tests += timeline.inputSeries + "\n    promql_expr_test:\n"
        for expectation in expectations {
            tests += "      - eval_time: \(expectation.minute)m\n"
            tests += "        expr: 'ALERTS{alertname=\"\(expectation.alert)\", alertstate=\"firing\"}'\n"
            if expectation.firing.isEmpty {
                tests += "        exp_samples: []\n"
                continue
            }
            tests += "        exp_samples:\n"
            for labels in expectation.firing {
                let all = labels.merging(["alertname": expectation.alert, "alertstate": "firing"]) { $1 }
                let body = all.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }
                tests += "          - labels: 'ALERTS{\(body.joined(separator: ", "))}'\n            value: 1\n"
            }
        }
        try tests.write(toFile: folder + "/test.yml", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        process.arguments = ["test", "rules", folder + "/test.yml"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus == 0, String(decoding: output, as: UTF8.self))
    }

    /// A scrape of the broker's `/metrics`.
    static func scrape(_ broker: TestBroker) async throws -> String {
        try await broker.admin("/metrics", token: "t0ken").text
    }

    @Test("A tenant whose APNs credential is refused: the paused-tenant alert fires, from the first scrape's zeroes")
    func pausedTenant() async throws {
        // The simulator knows another key than the broker's: every push is refused with InvalidProviderToken.
        let known = APNsCredentialAPITests.Key(keyID: "KEYKNOWN01")
        let unknown = APNsCredentialAPITests.Key(keyID: "KEYUNKNOWN")
        let (simulator, apns) = try await APNsCredentialAPITests.simulator(knowing: [known], configured: unknown)
        defer { Task { await simulator.stop() } }
        try await TestBroker.run(apns: apns, adminToken: "t0ken") { broker in
            let timeline = Timeline()
            timeline.scrape(["node-1": try await Self.scrape(broker)])
            let device = try await broker.send(
                .PUT,
                "/v1/devices/\(String(repeating: "ab", count: 32))",
                body: #"{"name": "phone", "environment": "production"}"#
            )
            #expect((200..<300).contains(device.status))
            #expect(try await broker.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
            #expect(
                try await eventually { await broker.application.pushGateway?.snapshot().paused[Fixture.acme] != nil }
            )
            for _ in 1...9 { timeline.scrape(["node-1": try await Self.scrape(broker)]) }
            let first = try #require(
                timeline.series.keys.first {
                    $0.hasPrefix("broker_push_credential_refused{") && $0.contains("tenant=\"acme\"")
                }
            )
            #expect(timeline.series[first]?[0] == 0 && timeline.series[first]?[9] == 1, "\(first)")
            let (ok, output) = try Self.promtool(
                timeline,
                [
                    Expectation(alert: "BrokerTenantPushPaused", minute: 3, firing: []),
                    Expectation(
                        alert: "BrokerTenantPushPaused",
                        minute: 9,
                        firing: [["severity": "page", "tenant": "acme", "channel": "apns"]]
                    ),
                ]
            )
            #expect(ok, "\(output)")
        }
    }

    @Test("Unregistered Android phones are routine: their refusals carry FCM's code and page no one")
    func fcmChurn() async throws {
        try await TestBroker.run(fcm: .embeddedSimulator, adminToken: "t0ken") { broker in
            let simulator = try #require(broker.application.simulator)
            let timeline = Timeline()
            for minute in 0..<25 {
                // A new phone each minute, whose app was removed: FCM answers UNREGISTERED, the device goes.
                let token = "churn-\(minute):APA91b" + String(repeating: "Q", count: 40)
                simulator.setToken(token, .unregistered(since: Date(timeIntervalSince1970: 0)))
                let registered = try await broker.send(
                    .PUT,
                    "/v1/devices/\(token)",
                    body: #"{"name": "Pixel", "platform": "fcm"}"#
                )
                #expect(registered.status == 201, "\(registered.text)")
                #expect(try await broker.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
                #expect(
                    try await eventually { try await broker.send(.GET, "/v1/devices").text.contains(token) == false }
                )
                timeline.scrape(["node-1": try await Self.scrape(broker)])
            }
            #expect(
                timeline.series.keys.contains {
                    $0.contains("channel=\"fcm\"") && $0.contains("reason=\"UNREGISTERED\"")
                },
                "\(timeline.series.keys.filter { $0.hasPrefix("broker_push_sent_total") })"
            )
            let (ok, output) = try Self.promtool(
                timeline,
                [
                    Expectation(alert: "BrokerFCMRefusing", minute: 24, firing: []),
                    Expectation(alert: "BrokerTenantPushPaused", minute: 24, firing: []),
                ]
            )
            #expect(ok, "\(output)")
        }
    }

    @Test(
        "A fresh start exports, per tenant and channel, the push counters at 0 and the credential state: the rules' series exist before the first push"
    )
    func seriesFromTheStart() async throws {
        try await TestBroker.run(fcm: .embeddedSimulator, adminToken: "t0ken") { broker in
            let text = try await Self.scrape(broker)
            for tenant in ["acme", "globex"] {
                for channel in ["apns", "fcm"] {
                    for outcome in ["accepted", "transport_failure"] {
                        let line = text.split(separator: "\n").first {
                            $0.hasPrefix("broker_push_sent_total{") && $0.contains("tenant=\"\(tenant)\"")
                                && $0.contains("channel=\"\(channel)\"") && $0.contains("outcome=\"\(outcome)\"")
                        }
                        #expect(line?.hasSuffix(" 0") == true, "\(tenant) \(channel) \(outcome): \(line ?? "absent")")
                    }
                    #expect(
                        text.contains(
                            "broker_push_credential_refused{tenant=\"\(tenant)\",channel=\"\(channel)\"} 0"
                        ),
                        "\(text.split(separator: "\n").filter { $0.hasPrefix("broker_push_credential_refused") })"
                    )
                }
            }
            #expect(text.contains("broker_ready 1"))
            #expect(text.contains("broker_build_info{version=\"\(BrokerBuild.version)\""))
            #expect(text.contains("broker_data_free_bytes "))
        }
    }

    @Test(
        "Two healthy nodes fire nothing; a stale backup fires; hand-written rule tests use only label sets the broker emits"
    )
    func healthyNodes() async throws {
        try await TestBroker.run(scheduler: SchedulerConfiguration(), adminToken: "t0ken") { first in
            try await TestBroker.run(adminToken: "t0ken") { second in
                // The second node's last backup was two days ago (as `broker store backup --into` records it).
                let status = #"{"lastSuccess": \#(Date().timeIntervalSince1970 - 2 * 86_400)}"#
                try status.write(toFile: second.directory + "/backup-status.json", atomically: true, encoding: .utf8)
                _ = try await first.send(
                    .PUT,
                    "/v1/devices/\(String(repeating: "ef", count: 32))",
                    body: #"{"name": "phone", "environment": "production"}"#
                )
                // acme learns delivery times (and has not fallen back): its valve's gauge is exported at 0.
                let learning = try await first.send(
                    .PATCH,
                    "/admin/v1/tenants/acme",
                    user: nil,
                    headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
                    body: #"{"learnedTiming": {"enabled": true}}"#
                )
                #expect(learning.status == 200, "\(learning.text)")
                let timeline = Timeline()
                for _ in 0..<70 {
                    timeline.scrape(["node-1": try await Self.scrape(first), "node-2": try await Self.scrape(second)])
                    if timeline.minutes % 10 == 1 {
                        #expect(try await first.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
                    }
                }
                let quiet = [
                    "BrokerNodeDown", "BrokerTargetsMissing", "BrokerAPNsUnreachable", "BrokerAPNsRefusing",
                    "BrokerFCMUnreachable", "BrokerFCMRefusing", "BrokerTenantPushPaused", "BrokerSchedulerFailing",
                    "BrokerPushQueueGrowing", "BrokerRESTErrors", "BrokerNotReady", "BrokerDiskLow",
                    "BrokerWebhookBacklog", "BrokerVersionsDiffer", "BrokerTLSCertificateExpiring",
                    "BrokerLearnedTimingFellBack",
                ].map { Expectation(alert: $0, minute: 69, firing: []) }
                let (ok, output) = try Self.promtool(
                    timeline,
                    quiet + [
                        Expectation(
                            alert: "BrokerBackupStale",
                            minute: 69,
                            firing: [["severity": "warning", "instance": "node-2"]]
                        )
                    ]
                )
                #expect(ok, "\(output)")

                // Every broker series the hand-written rule tests feed exists in these scrapes with the same labels.
                let written = try String(
                    contentsOfFile: (Self.rules as NSString).deletingLastPathComponent + "/alerts.test.yml",
                    encoding: .utf8
                )
                for match in written.matches(of: /series: '(broker_[a-z_]+)(\{[^']*\})?'/) {
                    let name = String(match.1)
                    let keys = Timeline.labels(name + String(match.2 ?? "{}")).keys.filter {
                        $0 != "job" && $0 != "instance"
                    }.sorted()
                    // Exported only by a PostgreSQL store, and for certificate credentials.
                    if ["broker_store_pool_waiting", "broker_apns_certificate_expiry_timestamp_seconds"].contains(name)
                    {
                        continue
                    }
                    let seen = timeline.shapes[name] ?? []
                    #expect(
                        seen.contains(keys),
                        "alerts.test.yml feeds \(name) with labels \(keys); the broker exports \(seen)"
                    )
                }
            }
        }
    }
}
