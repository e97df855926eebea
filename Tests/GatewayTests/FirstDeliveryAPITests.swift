import Engine
import Foundation
import GRDB
import TestSupport
import Testing

/// When users added through the admin API start, through the real server and its scheduler: the tenant's
/// setting, the per-request override on `POST /users` and on the import, and bad values refused.
@Suite("First delivery through the admin API", .timeLimit(.minutes(3)))
struct FirstDeliveryAPITests {
    /// A zone where it is about noon now, and a delivery time there an hour ago: today's time has passed (well
    /// within the staleness limit) whatever the hour the test runs at.
    static func passedDeliveryTime() -> (zone: String, time: String, tomorrow: String) {
        let hour = Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: Date()).hour ?? 12
        let offset = 12 - hour  // local = UTC + offset; Etc/GMT signs are inverted
        let zone = offset == 0 ? "Etc/GMT" : offset > 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        let earlier = calendar.dateComponents([.hour, .minute], from: Date().addingTimeInterval(-3600))
        let tomorrow = calendar.dateComponents([.year, .month, .day], from: Date().addingTimeInterval(86_400))
        return (
            zone,
            String(format: "%02d:%02d", earlier.hour ?? 11, earlier.minute ?? 0),
            String(format: "%04d-%02d-%02d", tomorrow.year ?? 0, tomorrow.month ?? 0, tomorrow.day ?? 0)
        )
    }

    @Test("Added after today's time: held to their next delivery time by default, welcomed at once when asked")
    func overrides() async throws {
        try await TestBroker.run(scheduler: SchedulerConfiguration(pollInterval: .milliseconds(100))) { broker in
            let (zone, time, tomorrow) = Self.passedDeliveryTime()
            let operatorHeaders = AdminAPITests.bearer + [("Content-Type", "application/json")]
            func add(_ name: String, _ firstDelivery: String?) async throws -> TestBroker.Reply {
                let start = firstDelivery.map { #", "firstDelivery": "\#($0)""# } ?? ""
                return try await broker.send(
                    .POST,
                    "/t/acme/admin/v1/users",
                    user: nil,
                    headers: operatorHeaders,
                    body:
                        #"{"username": "\#(name)", "password": "pa55-word", "timeZone": "\#(zone)", "deliveryTime": "\#(time)"\#(start)}"#
                )
            }
            func importing(_ name: String, query: String) async throws -> TestBroker.Reply {
                try await broker.send(
                    .POST,
                    "/t/acme/admin/v1/user-imports" + query,
                    user: nil,
                    headers: AdminAPITests.bearer + [("Content-Type", "text/csv")],
                    body: "username,password,timeZone,deliveryTime\n\(name),pa55-word,\(zone),\(time)\n"
                )
            }
            func delivered(_ name: String) async throws -> Int {
                guard let user = try await broker.store.user(tenant: Fixture.acme, username: name) else { return -1 }
                return try await broker.store.deliveredImpulses(
                    tenant: Fixture.acme,
                    user: user.id,
                    after: nil,
                    before: nil,
                    limit: 10
                ).count
            }
            let database = try DatabaseQueue(path: broker.directory + "/broker.sqlite")
            func plannedDay(_ name: String) throws -> String? {
                try database.read {
                    try String.fetchOne(
                        $0,
                        sql: """
                            SELECT s.local_date FROM schedules s JOIN users u ON u.id = s.user_id
                            WHERE u.tenant_id = 'acme' AND u.username = ?
                            """,
                        arguments: [name]
                    )
                }
            }

            let tenant = try await broker.send(.GET, "/admin/v1/tenants/acme", user: nil, headers: AdminAPITests.bearer)
            #expect(tenant.json["firstDelivery"] as? String == "next-delivery-time", "\(tenant.text)")
            #expect(try await add("held", nil).status == 201)
            #expect(try await add("welcomed", "immediate").status == 201)
            let bad = try await add("odd", "soon")
            #expect(bad.status == 400 || bad.status == 422, "\(bad.text)")
            #expect(bad.headers["content-type"].first?.hasPrefix("application/problem+json") == true)
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "odd") == nil)
            let badQuery = try await importing("odd", query: "?firstDelivery=soon")
            #expect(badQuery.status == 400 && badQuery.text.contains("invalid-query"), "\(badQuery.text)")
            #expect(try await importing("imported", query: "").json["created"] as? Int == 1)
            #expect(
                try await importing("imported-welcome", query: "?firstDelivery=immediate").json["created"] as? Int == 1
            )

            #expect(try await eventually { try await delivered("welcomed") == 1 })
            #expect(try await eventually { try await delivered("imported-welcome") == 1 })
            #expect(try await eventually { try plannedDay("held") != nil && plannedDay("imported") != nil })
            #expect(try plannedDay("held") == tomorrow)
            #expect(try plannedDay("imported") == tomorrow)
            #expect(try await delivered("held") == 0)
            #expect(try await delivered("imported") == 0)

            // The tenant chooses welcome impulses: a user added without an override gets one at once.
            let changed = try await broker.send(
                .PATCH,
                "/admin/v1/tenants/acme",
                user: nil,
                headers: operatorHeaders,
                body: #"{"firstDelivery": "immediate"}"#
            )
            #expect(changed.status == 200 && changed.json["firstDelivery"] as? String == "immediate", "\(changed.text)")
            let refused = try await broker.send(
                .PATCH,
                "/admin/v1/tenants/acme",
                user: nil,
                headers: operatorHeaders,
                body: #"{"firstDelivery": "whenever"}"#
            )
            #expect(refused.status == 400 || refused.status == 422, "\(refused.text)")
            #expect(try await add("later", nil).status == 201)
            #expect(try await eventually { try await delivered("later") == 1 })
        }
    }
}
