import Engine
import Foundation
import TestSupport
import Testing

/// What of the deployment kit (`deploy/`) a test can hold against the running broker; `deploy/check` checks the
/// rest (the container's build steps, the systemd unit, the Debian package, the manifests).
@Suite("The deployment kit", .timeLimit(.minutes(2)))
struct DeployKitTests {
    /// The repository's root (this file is Tests/GatewayTests/DeployKitTests.swift).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every metric name in a query of the Grafana dashboard the compose stack provisions.
    static func dashboardMetrics() throws -> Set<String> {
        let url = repository.appendingPathComponent("deploy/compose/grafana/dashboards/impulse-broker.json")
        let dashboard = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var expressions: [String] = []
        func collect(_ panels: [[String: Any]]) {
            for panel in panels {
                for target in panel["targets"] as? [[String: Any]] ?? [] {
                    if let expression = target["expr"] as? String { expressions.append(expression) }
                }
                collect(panel["panels"] as? [[String: Any]] ?? [])
            }
        }
        collect(dashboard["panels"] as? [[String: Any]] ?? [])
        return Set(expressions.flatMap { $0.matches(of: /broker_[a-z0-9_]+/).map { String($0.output) } })
    }

    @Test("The Grafana dashboard's queries name only metrics that /metrics exports")
    func dashboardNamesExportedMetrics() async throws {
        let wanted = try Self.dashboardMetrics()
        // Pushes, dispatch, APNs, REST, the store and the nodes: the panels an operator looks at on a morning burst.
        #expect(wanted.count >= 20, "\(wanted.sorted())")
        try await TestBroker.run(
            database: .postgres,
            scheduler: SchedulerConfiguration(pollInterval: .milliseconds(100)),
            adminToken: "t0ken"
        ) { broker in
            // Traffic that makes every family appear: REST requests, a device, a push, a reminder the scheduler
            // fires (dispatch lag), and a GOAWAY from APNs.
            #expect(try await broker.send(.GET, "/v1/impulses").status == 200)
            let token = String(repeating: "5c", count: 32)
            let body = #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#
            #expect(try await broker.send(.POST, "/RegisterToken", body: body).status == 204)
            #expect(try await broker.sendPush("command=send&impulse=acme-5&target=alice").status == 200)
            #expect(try await broker.remind("acme-3", in: 2).status == 201)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually(seconds: 30) { simulator.accepted.count == 2 })
            simulator.goAwayAll(reason: "Shutdown")
            var families: Set<String> = []
            var text = ""
            let complete = try await eventually(seconds: 30) {
                text = try await broker.admin("/metrics", token: "t0ken").text
                families = Self.families(text)
                return wanted.allSatisfy { families.contains(Self.family(of: $0, among: families)) }
            }
            let missing = wanted.filter { !families.contains(Self.family(of: $0, among: families)) }
            #expect(complete, "the dashboard names metrics /metrics does not export: \(missing.sorted())\n\(text)")
        }
    }

    /// The families `# TYPE` lines declare.
    static func families(_ text: String) -> Set<String> {
        Set(
            text.split(separator: "\n").compactMap { line in
                line.hasPrefix("# TYPE ") ? line.split(separator: " ").dropFirst(2).first.map(String.init) : nil
            }
        )
    }

    /// The family a sample name belongs to: a histogram's `_bucket`, `_sum` and `_count` series are its own.
    static func family(of name: String, among families: Set<String>) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if families.contains(base) { return base }
        }
        return name
    }
}
