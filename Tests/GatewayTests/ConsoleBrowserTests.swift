import Engine
import Foundation
import Testing

@testable import Gateway

/// The web console in a real headless Chromium (Debian's chromium and chromium-driver, driven by selenium from
/// `scripts/console-browser-test.py`): sign in, import users from a CSV, see them, deliver an impulse and watch
/// today's figures change, delete a user, and CSRF and XSS probes that must fail safely. Screenshots of each page
/// go to `.build/console-screenshots/`. One store at a time: two Chromiums beside the rest of the suite on two cores
/// stretched other tests past their time limits.
@Suite("The console in a browser", .serialized, .timeLimit(.minutes(5)))
struct ConsoleBrowserTests {
    static let screenshots = DeployKitTests.repository.appendingPathComponent(".build/console-screenshots").path

    @Test(
        "Sign in, import, see, deliver, report, delete; CSRF and markup probes fail safely",
        arguments: TestDatabase.allCases
    )
    func browser(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            // An impulse whose title is markup: the console must show it as text.
            var probe = try Fixture.impulse(Fixture.acme, "probe")
            probe.title = #"<script>alert(1)</script><img src=x onerror="alert(2)">"#
            _ = try await broker.store.importImpulses([probe], tenant: Fixture.acme)
            let delivered = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users/alice/deliveries",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"impulse": "probe"}"#
            )
            #expect(delivered.status == 201, "\(delivered.text)")
            // Thirty days of history for the chart: alice got a few impulses a day and read some of them.
            let now = Date()
            let alice = try #require(try await broker.store.user(tenant: Fixture.acme, username: "alice")).id
            for day in 1..<30 {
                let at = now.addingTimeInterval(Double(-day * 86_400))
                let recorded = try await broker.store.recordDeliveries(
                    try (0..<(4 + day % 5)).map { index in
                        NewDelivery(
                            tenant: Fixture.acme,
                            user: alice,
                            impulse: try ImpulseID("acme-\(1 + (day + index) % Fixture.aliceDeliveries)"),
                            kind: .manual,
                            assignedAt: at,
                            reportDay: NewDelivery.reportDay(assignedAt: at, zone: "Europe/Berlin")
                        )
                    }
                )
                try await broker.store.applyMarks(
                    recorded.prefix(2 + day % 3).map {
                        DeliveryMark(tenant: Fixture.acme, delivery: $0.id, kind: .read, at: at.addingTimeInterval(600))
                    }
                )
            }
            let process = Process()
            process.executableURL = DeployKitTests.repository.appendingPathComponent("scripts/console-browser-test")
            var environment = ProcessInfo.processInfo.environment
            environment["CONSOLE_URL"] = "https://127.0.0.1:\(broker.httpsPort)"
            environment["CONSOLE_TENANT"] = "acme"
            environment["CONSOLE_ADMIN"] = "root"
            environment["CONSOLE_PASSWORD"] = Fixture.rootPassword
            environment["CONSOLE_IMPULSE"] = "acme-2"
            environment["CONSOLE_OPERATOR_TOKEN"] = Fixture.operatorToken
            environment["CONSOLE_SCREENSHOTS"] = Self.screenshots + "/" + database.rawValue
            process.environment = environment
            // Output to a file and the exit awaited, not waited for: a blocked thread of the cooperative pool (two
            // on this machine) would stall the broker the browser is talking to.
            let log = broker.directory + "/console-browser-test.log"
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
            process.standardOutput = handle
            process.standardError = handle
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                process.terminationHandler = { _ in continuation.resume() }
                do {
                    try process.run()
                } catch {
                    Issue.record("cannot run the browser test: \(error)")
                    continuation.resume()
                }
            }
            try handle.close()
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            print(text)
            #expect(process.terminationStatus == 0, "\(text.suffix(3000))")
            #expect(text.contains("console browser test: passed"))
            for page in [
                "sign-in", "dashboard", "import-report", "users", "report", "catalog", "audit", "webhooks",
                "dashboard-phone",
            ] {
                let file = Self.screenshots + "/" + database.rawValue + "/" + page + ".png"
                #expect(FileManager.default.fileExists(atPath: file), "no screenshot \(file)")
            }
        }
    }
}
