import Engine
import Foundation
import TestSupport
import Testing

/// `GET /t/{tenant}/admin/v1/reports/engagement` (and its CSV tables): what happened to a tenant's deliveries,
/// read from daily rows the ledger's writes keep, through the real broker, APNs simulator and app API.
@Suite("Admin API: engagement reports", .timeLimit(.minutes(3)))
struct EngagementReportAPITests {
    static let token = String(repeating: "ab", count: 32)

    /// Today in acme's zone (Europe/Berlin), as the report counts a manual delivery.
    static var today: String { NewDelivery.reportDay(assignedAt: Date(), zone: "Europe/Berlin") }

    func report(_ broker: TestBroker, _ query: String = "") async throws -> TestBroker.Reply {
        try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement" + query, user: "root")
    }

    func day(_ reply: TestBroker.Reply, _ day: String) -> [String: Any] {
        let days = reply.json["days"] as? [[String: Any]] ?? []
        return days.first { $0["day"] as? String == day }?["counts"] as? [String: Any] ?? [:]
    }

    @Test(
        "Deliveries pushed, without a device and read show in the day's report, as JSON and CSV",
        arguments: TestDatabase.allCases
    )
    func deliveredAndRead(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let device = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(Self.token)",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "production"}"#
            )
            #expect((200..<300).contains(device.status), "\(device.text)")
            for user in ["alice", "bob"] {
                let delivered = try await broker.send(
                    .POST,
                    "/t/acme/admin/v1/users/\(user)/deliveries",
                    user: "root",
                    headers: [("Content-Type", "application/json")],
                    body: #"{"impulse": "acme-2"}"#
                )
                #expect(delivered.status == 201, "\(delivered.text)")
            }
            let today = Self.today
            // alice's push is accepted; bob has no device. Both are settled by the push gateway, then counted.
            var counts: [String: Any] = [:]
            let settled = try await eventually(seconds: 15) {
                counts = day(try await report(broker), today)
                return counts["pushed"] as? Int == 1 && counts["noDevice"] as? Int == 1
            }
            #expect(settled, "\(counts)")
            #expect(counts["assigned"] as? Int == 2 && counts["failed"] as? Int == 0 && counts["read"] as? Int == 0)
            #expect(counts["readRate"] as? Double == 0)

            #expect(try await broker.send(.PUT, "/v1/impulses/acme-2/read").status < 300)
            let read = try await eventually(seconds: 15) {
                counts = day(try await report(broker), today)
                return counts["read"] as? Int == 1
            }
            #expect(read, "\(counts)")
            #expect(counts["fetched"] as? Int == 1 && counts["readRate"] as? Double == 0.5)
            // Read within a minute of its push: the median lies in the first bucket.
            #expect((0...60).contains(counts["medianSecondsToRead"] as? Int ?? -1), "\(counts)")

            let whole = try await report(broker, "?from=\(today)&to=\(today)")
            #expect(whole.status == 200 && whole.headers["content-type"].first?.hasPrefix("application/json") == true)
            let impulses = whole.json["impulses"] as? [[String: Any]] ?? []
            #expect(impulses.map { $0["impulseID"] as? String } == ["acme-2"])
            let areas = whole.json["lifeAreas"] as? [[String: Any]] ?? []
            #expect(areas.count == 1 && (areas.first?["counts"] as? [String: Any])?["assigned"] as? Int == 2)

            let csv = try await broker.send(
                .GET,
                "/t/acme/admin/v1/reports/engagement/days.csv?from=\(today)&to=\(today)",
                user: "root"
            )
            #expect(csv.status == 200 && csv.headers["content-type"].first?.hasPrefix("text/csv") == true)
            #expect(csv.headers["content-disposition"].first?.contains("attachment") == true)
            let lines = csv.text.components(separatedBy: "\r\n")
            #expect(lines.first?.hasPrefix("day,active,due,") == true)
            #expect(lines.count == 3 && lines[1].hasPrefix("\(today),0,0,0,0,0,2,1,1,0,1,1,0.5000,"), "\(lines)")
            let byImpulse = try await broker.send(
                .GET,
                "/t/acme/admin/v1/reports/engagement/impulses.csv?from=\(today)&to=\(today)",
                user: "root"
            )
            #expect(byImpulse.text.contains("\r\nacme-2,"), "\(byImpulse.text)")
        }
    }

    @Test("Earlier days hold their deliveries; bad ranges, unknown tables and other tenants are refused")
    func rangesAndRefusals() async throws {
        try await TestBroker.run(database: .sqlite) { broker in
            // The fixture gave alice one delivery a day from 2023-11-15 (UTC dates: no tenant zone then).
            let history = try await report(broker, "?from=2023-11-01&to=2023-11-30")
            #expect(history.status == 200, "\(history.text)")
            #expect((history.json["total"] as? [String: Any])?["assigned"] as? Int == Fixture.aliceDeliveries)
            #expect((history.json["days"] as? [Any])?.count == 30)
            #expect(day(history, "2023-11-15")["assigned"] as? Int == 1)
            // Without a range: the 30 days through today.
            let recent = try await report(broker)
            #expect((recent.json["days"] as? [[String: Any]])?.last?["day"] as? String == Self.today)

            for query in ["?from=2023-11-30&to=2023-11-01", "?from=2020-01-01&to=2023-01-01", "?from=monday"] {
                let refused = try await report(broker, query)
                #expect(refused.status == 400 && refused.text.contains("invalid-query"), "\(query): \(refused.text)")
                #expect(refused.headers["content-type"].first == "application/problem+json", "\(query)")
            }
            let table = try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement/secrets.csv", user: "root")
            #expect(table.status == 404)
            let other = try await broker.send(.GET, "/t/globex/admin/v1/reports/engagement", user: "root")
            // Root's credentials are acme's: in globex there is no such login.
            #expect(other.status == 401 || other.status == 404, "\(other.status)")
            // An app user is not an admin.
            #expect(try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement").status == 403)
        }
    }
}
