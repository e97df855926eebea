import Engine
import Foundation
import TestSupport
import Testing

/// A tenant's admins change its programme (`PATCH /t/{tenant}/admin/v1/tenant`, the console's settings page);
/// its name, APNs settings and suspension stay an operator's.
@Suite("A tenant's programme, changed by its admins", .timeLimit(.minutes(2)))
struct TenantProgrammeTests {
    @Test("Programme members are the admins'; the rest answers 403 and changes nothing; another tenant is not theirs")
    func programme() async throws {
        try await TestBroker.run { broker in
            let json = [("Content-Type", "application/json")]
            func patch(_ body: String, user: String = "root", tenant: String = "acme") async throws -> TestBroker.Reply
            {
                try await broker.send(.PATCH, "/t/\(tenant)/admin/v1/tenant", user: user, headers: json, body: body)
            }
            let changed = try await patch(
                #"{"firstDelivery": "immediate", "weekdays": [1, 2, 3, 4, 5], "deliveryTime": "07:45", "quietHours": {"start": "21:00", "end": "06:30"}}"#
            )
            #expect(changed.status == 200, "\(changed.text)")
            #expect(changed.json["firstDelivery"] as? String == "immediate")
            #expect(changed.json["weekdays"] as? [Int] == [1, 2, 3, 4, 5])
            #expect(changed.json["deliveryTime"] as? String == "07:45")
            for body in [#"{"suspended": true}"#, #"{"apnsTopic": "com.other.app"}"#, #"{"name": "Not Acme"}"#] {
                let refused = try await patch(body)
                #expect(refused.status == 403 && refused.text.contains("needs an operator"), "\(body): \(refused.text)")
            }
            let tenant = try #require(try await broker.store.tenant(Fixture.acme))
            #expect(!tenant.suspended && tenant.name != "Not Acme" && tenant.apnsTopic != "com.other.app")
            #expect(try await patch(#"{"weekdays": [1]}"#, user: "alice").status != 200)  // not an admin
            #expect(try await patch(#"{"weekdays": [1]}"#, tenant: "globex").status != 200)  // not their tenant
            #expect(try await broker.store.tenant(Fixture.globex)?.weekdays.days == Array(1...7))
            // An operator may change the rest there too.
            let byOperator = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/tenant",
                user: nil,
                headers: AdminAPITests.bearer + json,
                body: #"{"name": "Acme Group"}"#
            )
            #expect(
                byOperator.status == 200 && byOperator.json["name"] as? String == "Acme Group",
                "\(byOperator.text)"
            )
        }
    }

    @Test("Saving settings that change nothing answers the tenant and writes no audit entry")
    func unchanged() async throws {
        try await TestBroker.run { broker in
            let json = [("Content-Type", "application/json")]
            let body = #"{"weekdays": [1, 2, 3, 4, 5], "quietHours": {"start": "21:00", "end": "06:30"}}"#
            func save() async throws -> TestBroker.Reply {
                try await broker.send(.PATCH, "/t/acme/admin/v1/tenant", user: "root", headers: json, body: body)
            }
            func trail() async throws -> [String] {
                let reply = try await broker.send(.GET, "/t/acme/admin/v1/audit", user: "root")
                return (reply.json["items"] as? [[String: Any]] ?? []).compactMap { $0["action"] as? String }
            }
            #expect(try await save().status == 200)
            #expect(try await trail() == ["tenant.update"])
            let again = try await save()
            #expect(again.status == 200 && again.json["weekdays"] as? [Int] == [1, 2, 3, 4, 5], "\(again.text)")
            #expect(try await trail() == ["tenant.update"])
        }
    }
}
