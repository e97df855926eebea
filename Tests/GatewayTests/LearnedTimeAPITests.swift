import Engine
import Foundation
import GRDB
import TestSupport
import Testing

/// Learned delivery times through the real server: the tenant's settings in the admin API (shown, changed, bad
/// values refused with a problem), a user's learned time and opt-in through the admin API and the app's API, the
/// scheduler planning with it, the export holding it and the audit trail recording the opt-in.
@Suite("Learned delivery times through the APIs", .timeLimit(.minutes(3)))
struct LearnedTimeAPITests {
    @Test(
        "Settings, a user's learned time and opt-in, the export and the audit trail",
        arguments: TestDatabase.allCases
    )
    func throughTheAPIs(_ database: TestDatabase) async throws {
        try await TestBroker.run(
            database: database,
            scheduler: SchedulerConfiguration(pollInterval: .milliseconds(100))
        ) { broker in
            let json = AdminAPITests.bearer + [("Content-Type", "application/json")]
            let off = try await broker.send(.GET, "/admin/v1/tenants/acme", user: nil, headers: AdminAPITests.bearer)
            let defaults = try #require(off.json["learnedTiming"] as? [String: Any], "\(off.text)")
            #expect(defaults["enabled"] as? Bool == false)
            #expect(defaults["windowMinutes"] as? Int == 180)
            #expect(defaults["holdoutShare"] as? Double == 0.1)

            // Bad values: a problem naming the member (out of range: 422; not a boolean: 400), and nothing changes.
            for (body, status) in [
                (#"{"learnedTiming": {"windowMinutes": 5}}"#, 422), (#"{"learnedTiming": {"holdoutShare": 0.9}}"#, 422),
                (#"{"learnedTiming": {"holdoutShare": -0.1}}"#, 422), (#"{"learnedTiming": {"enabled": "yes"}}"#, 400),
            ] {
                let refused = try await broker.send(
                    .PATCH,
                    "/admin/v1/tenants/acme",
                    user: nil,
                    headers: json,
                    body: body
                )
                #expect(refused.status == status, "\(body): \(refused.text)")
                #expect(refused.headers["content-type"].first?.hasPrefix("application/problem+json") == true)
                #expect(refused.text.contains("learnedTiming") || refused.text.contains("enabled"), "\(refused.text)")
            }
            let unchanged = try await broker.send(
                .GET,
                "/admin/v1/tenants/acme",
                user: nil,
                headers: AdminAPITests.bearer
            )
            #expect(
                unchanged.json["learnedTiming"] as? [String: Double] == [
                    "enabled": 0, "windowMinutes": 180, "holdoutShare": 0.1,
                ]
            )
            let changed = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/tenant",
                user: nil,
                headers: json,
                body: #"{"learnedTiming": {"enabled": true, "windowMinutes": 120, "holdoutShare": 0}}"#
            )
            #expect(changed.status == 200, "\(changed.text)")
            let settings = try #require(changed.json["learnedTiming"] as? [String: Any], "\(changed.text)")
            #expect(settings["enabled"] as? Bool == true)
            #expect(settings["windowMinutes"] as? Int == 120)
            #expect(settings["holdoutShare"] as? Double == 0)

            // The scheduler plans bob again under the new setting: a new user keeps the stated time for now.
            let bobPath = "/t/acme/admin/v1/users/bob/learned-time"
            #expect(
                try await eventually {
                    let view = try await broker.send(.GET, bobPath, user: nil, headers: AdminAPITests.bearer)
                    return view.json["reason"] as? String == "learning"
                },
                "bob's day planned with the tenant learning"
            )
            let bob = try await broker.send(.GET, bobPath, user: nil, headers: AdminAPITests.bearer)
            #expect(bob.json["tenantLearns"] as? Bool == true, "\(bob.text)")
            #expect(bob.json["nextTime"] as? String == "08:00", "\(bob.text)")
            #expect(bob.json["summary"] as? String == "08:00, fixed until enough deliveries: 0 of 7", "\(bob.text)")
            #expect(bob.json["deliveries"] as? Int == 0)

            // The app: my learned time, and my opt-in.
            let mine = try await broker.send(.GET, "/v1/me/learned-time", user: "bob")
            #expect(mine.status == 200, "\(mine.text)")
            #expect(mine.json["optedIn"] as? Bool == false)
            #expect(mine.json["ownTime"] as? Bool == false)
            let optIn = try await broker.send(
                .PUT,
                "/v1/me/learned-time",
                user: "bob",
                headers: [("Content-Type", "application/json")],
                body: #"{"optedIn": true}"#
            )
            #expect(optIn.status == 200, "\(optIn.text)")
            #expect(optIn.json["optedIn"] as? Bool == true)
            let malformed = try await broker.send(
                .PUT,
                "/v1/me/learned-time",
                user: "bob",
                headers: [("Content-Type", "application/json")],
                body: #"{"optedIn": "please"}"#
            )
            #expect(malformed.status == 400, "\(malformed.text)")
            #expect(try await broker.send(.GET, "/v1/me/learned-time", user: "bob").json["optedIn"] as? Bool == true)

            // An admin opts bob out again: audited.
            let optOut = try await broker.send(.PUT, bobPath, user: nil, headers: json, body: #"{"optedIn": false}"#)
            #expect(optOut.status == 200, "\(optOut.text)")
            #expect(optOut.json["optedIn"] as? Bool == false)
            let unknown = try await broker.send(
                .PUT,
                "/t/acme/admin/v1/users/nobody/learned-time",
                user: nil,
                headers: json,
                body: #"{"optedIn": true}"#
            )
            #expect(unknown.status == 404, "\(unknown.text)")
            let audit = try await broker.send(.GET, "/t/acme/admin/v1/audit", user: nil, headers: AdminAPITests.bearer)
            #expect(audit.text.contains("user.learned-time.opt-out"), "\(audit.text)")

            // The export holds it.
            let export = try await broker.send(
                .GET,
                "/t/acme/admin/v1/users/bob/export",
                user: nil,
                headers: AdminAPITests.bearer
            )
            let learned = try #require(export.json["learnedTime"] as? [String: Any], "\(export.text)")
            let view = try #require(learned["view"] as? [String: Any])
            #expect(view["reason"] as? String == "learning")
            #expect((learned["evidence"] as? [Any])?.isEmpty == true)

            // The engagement report: no folded day yet, no week to compare.
            let range = "?from=2026-11-02&to=2026-11-15"
            let empty = try await broker.send(
                .GET,
                "/t/acme/admin/v1/reports/engagement" + range,
                user: nil,
                headers: AdminAPITests.bearer
            )
            #expect((empty.json["learnedTiming"] as? [Any])?.isEmpty == true, "\(empty.text)")
            guard database == .sqlite else { return }
            // Counts as the scheduler's folds leave them (its store test checks those): a week of each arm, per day
            // for the medians and per user for the rates: two users a side, seven deliveries each.
            let file = try DatabaseQueue(path: broker.directory + "/broker.sqlite")
            try await file.write { db in
                for (day, arm, bucket, deliveries) in [
                    ("2026-11-09", 0, 3, 60), ("2026-11-09", 0, -1, 40), ("2026-11-10", 1, 6, 5),
                    ("2026-11-10", 1, -1, 15),
                ] {
                    try db.execute(
                        sql: "INSERT INTO timing_outcomes VALUES ('acme', ?, ?, ?, ?)",
                        arguments: [day, arm, bucket, deliveries]
                    )
                }
                let users = try Int64.fetchAll(
                    db,
                    sql: "SELECT id FROM users WHERE tenant_id = 'acme' ORDER BY id LIMIT 4"
                )
                try #require(users.count == 4)
                for (user, (arm, withinHour, read)) in zip(users, [(0, 6, 7), (0, 5, 6), (1, 2, 4), (1, 3, 5)]) {
                    try db.execute(
                        sql: "INSERT INTO timing_user_weeks VALUES ('acme', ?, '2026-11-09', ?, 7, ?, ?)",
                        arguments: [user, arm, withinHour, read]
                    )
                }
            }
            let report = try await broker.send(
                .GET,
                "/t/acme/admin/v1/reports/engagement" + range,
                user: nil,
                headers: AdminAPITests.bearer
            )
            let weeks = try #require(report.json["learnedTiming"] as? [[String: Any]], "\(report.text)")
            #expect(weeks.count == 1 && weeks.first?["weekStart"] as? String == "2026-11-09", "\(report.text)")
            let week = try #require(weeks.first)
            let learnedArm = try #require(week["learned"] as? [String: Any])
            #expect(learnedArm["users"] as? Int == 2 && learnedArm["deliveries"] as? Int == 14)
            #expect(learnedArm["readWithinHour"] as? Int == 11 && learnedArm["read"] as? Int == 13)
            #expect(learnedArm["medianSecondsToRead"] as? Int == 1350, "\(learnedArm)")
            let difference = try #require(week["withinHourDifference"] as? [String: Any], "\(week)")
            #expect(abs((difference["estimate"] as? Double ?? 0) - 6.0 / 14) < 1e-9, "\(difference)")
            #expect(difference["significant"] is Bool && difference["low"] is Double && difference["high"] is Double)
            #expect(report.json["learnedTimingOverall"] is [String: Any], "\(report.text)")
            let csv = try await broker.send(
                .GET,
                "/t/acme/admin/v1/reports/engagement/learned-timing.csv" + range,
                user: nil,
                headers: AdminAPITests.bearer
            )
            let lines = csv.text.split(separator: "\r\n")
            #expect(csv.status == 200 && lines.count == 3, "\(csv.text)")
            #expect(
                lines.first?.hasPrefix(
                    "week_start,learned_users,learned_deliveries,learned_read_within_hour,learned_within_hour_rate"
                ) == true,
                "\(csv.text)"
            )
            #expect(lines[1].hasPrefix("2026-11-09,2,14,11,0.7857,13,0.9286,1350,2,14,5,0.3571,"), "\(csv.text)")
            #expect(lines[1].contains(",0.4286,"), "\(csv.text)")
            #expect(lines[2].hasPrefix("all,2,14,11,"), "\(csv.text)")

            // The console's report page: the headline in plain words, both arms and the difference.
            let signedIn = try await ConsoleTests().signIn(
                broker,
                "/t/acme/console/sign-in",
                "root",
                Fixture.rootPassword
            )
            let cookie = try #require(ConsoleTests.cookie(signedIn), "\(signedIn.status)")
            let page = try await broker.send(
                .GET,
                "/t/acme/console/report" + range,
                user: nil,
                headers: [("Cookie", cookie)]
            )
            #expect(page.status == 200)
            #expect(page.text.contains("Learned delivery times against the holdout"), "\(page.text.prefix(300))")
            #expect(page.text.contains("78.6% of impulses were read within the hour"), "\(page.text)")
            #expect(page.text.contains("35.7%"), "\(page.text)")
            #expect(page.text.contains("+42.9 pp"), "\(page.text)")
        }
    }

    @Test(
        "A tenant fallen back: its settings, the metric and the report say so; the admin API's resume turns learning back on"
    )
    func fallback() async throws {
        try await TestBroker.run(adminToken: "t0ken") { broker in
            let json = AdminAPITests.bearer + [("Content-Type", "application/json")]
            let on = try await broker.send(
                .PATCH,
                "/admin/v1/tenants/acme",
                user: nil,
                headers: json,
                body: #"{"learnedTiming": {"enabled": true}}"#
            )
            #expect(on.status == 200, "\(on.text)")
            #expect(
                try await broker.admin("/metrics", token: "t0ken").text.contains(
                    #"broker_learned_timing_fallback{tenant="acme"} 0"#
                )
            )
            // As the safety valve writes it.
            var tenant = try #require(try await broker.store.tenant(try TenantID("acme")))
            tenant.learnedTiming.fallback = LearnedTimingFallback(
                since: try LocalDate(parsing: "2026-12-03"),
                weeks: [try LocalDate(parsing: "2026-11-16"), try LocalDate(parsing: "2026-11-23")],
                reason: "learned times were read within the hour significantly less often"
            )
            try await broker.store.updateTenant(
                tenant,
                audit: AuditEntry(
                    .commandLine,
                    "tenant.learned-timing.fallback",
                    tenant: tenant.id,
                    target: "tenant:acme"
                )
            )
            let shown = try await broker.send(.GET, "/admin/v1/tenants/acme", user: nil, headers: AdminAPITests.bearer)
            let settings = try #require(shown.json["learnedTiming"] as? [String: Any], "\(shown.text)")
            let fallback = try #require(settings["fallback"] as? [String: Any], "\(shown.text)")
            #expect(fallback["since"] as? String == "2026-12-03")
            #expect(fallback["weeks"] as? [String] == ["2026-11-16", "2026-11-23"])
            #expect(
                try await broker.admin("/metrics", token: "t0ken").text.contains(
                    #"broker_learned_timing_fallback{tenant="acme"} 1"#
                )
            )
            // Saving the form's other settings does not resume it; resume does, and says from when it is judged.
            let other = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/tenant",
                user: nil,
                headers: json,
                body: #"{"learnedTiming": {"enabled": true, "windowMinutes": 120}}"#
            )
            #expect((other.json["learnedTiming"] as? [String: Any])?["fallback"] != nil, "\(other.text)")
            let resumed = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/tenant",
                user: nil,
                headers: json,
                body: #"{"learnedTiming": {"resume": true}}"#
            )
            #expect(resumed.status == 200, "\(resumed.text)")
            let after = try #require(resumed.json["learnedTiming"] as? [String: Any], "\(resumed.text)")
            #expect(after["fallback"] == nil && after["watchFrom"] is String, "\(resumed.text)")
            #expect(
                try await broker.admin("/metrics", token: "t0ken").text.contains(
                    #"broker_learned_timing_fallback{tenant="acme"} 0"#
                )
            )
            let refused = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/tenant",
                user: nil,
                headers: json,
                body: #"{"learnedTiming": {"resume": "yes"}}"#
            )
            #expect(refused.status == 400, "\(refused.text)")
        }
    }
}
