import Engine
import Foundation
import NIOHTTP1
import TestSupport
import Testing

/// The admin API through the real server: operators under `/admin/v1`, a tenant's admins under
/// `/t/{tenant}/admin/v1`, every write audited, a rejected request writing nothing, tenants isolated.
@Suite("Admin API", .timeLimit(.minutes(2)))
struct AdminAPITests {
    static let bearer = [("Authorization", "Bearer \(Fixture.operatorToken)")]

    /// A request as the operator (the configured token).
    func asOperator(
        _ broker: TestBroker,
        _ method: HTTPMethod,
        _ path: String,
        _ body: String? = nil,
        headers: [(String, String)] = []
    ) async throws -> TestBroker.Reply {
        try await broker.send(method, path, user: nil, headers: Self.bearer + headers + Self.json(body), body: body)
    }

    static func json(_ body: String?) -> [(String, String)] {
        body == nil ? [] : [("Content-Type", "application/json")]
    }

    @Test(
        "Operators need the token or an operator account; a tenant admin or a wrong token is not one",
        arguments: TestDatabase.allCases
    )
    func operatorAuthentication(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            #expect(try await broker.send(.GET, "/admin/v1/tenants", user: nil).status == 401)
            let wrong = try await broker.send(
                .GET,
                "/admin/v1/tenants",
                user: nil,
                headers: [("Authorization", "Bearer nope")]
            )
            #expect(wrong.status == 401)
            #expect(wrong.headers["content-type"].first?.hasPrefix("application/problem+json") == true)
            // The tenant's admin is not an operator.
            #expect(try await broker.send(.GET, "/admin/v1/tenants", user: "root").status == 401)
            let listed = try await asOperator(broker, .GET, "/admin/v1/tenants")
            #expect(listed.status == 200)
            let ids = (listed.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(ids == ["acme", "globex"], "\(listed.text)")
            // An operator account, added by the operator, logs in with Basic.
            let added = try await asOperator(
                broker,
                .POST,
                "/admin/v1/operators",
                #"{"name": "ops", "password": "0ps-secret"}"#
            )
            #expect(added.status == 201, "\(added.text)")
            #expect(try await broker.send(.GET, "/admin/v1/tenants", user: "ops", password: "0ps-secret").status == 200)
            #expect(try await broker.send(.GET, "/admin/v1/tenants", user: "ops", password: "wrong").status == 401)
            // The operator account may administer a tenant's users too.
            #expect(
                try await broker.send(.GET, "/t/globex/admin/v1/users", user: "ops", password: "0ps-secret").status
                    == 200
            )
        }
    }

    @Test(
        "Tenants: create, read, change, suspend (clients and admins refused, no dispatch), resume, delete with confirmation",
        arguments: TestDatabase.allCases
    )
    func tenantLifecycle(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let created = try await asOperator(
                broker,
                .POST,
                "/admin/v1/tenants",
                #"{"id": "initech", "name": "Initech", "defaultTimeZone": "America/Chicago", "apnsTopic": "com.initech.app"}"#
            )
            #expect(created.status == 201, "\(created.text)")
            #expect(created.headers["location"].first == "/admin/v1/tenants/initech")
            #expect(created.json["defaultTimeZone"] as? String == "America/Chicago")
            #expect(try await asOperator(broker, .POST, "/admin/v1/tenants", #"{"id": "initech"}"#).status == 409)
            let invalid = try await asOperator(
                broker,
                .POST,
                "/admin/v1/tenants",
                #"{"id": "x", "defaultTimeZone": "Mars/Olympus"}"#
            )
            #expect(invalid.status == 422, "\(invalid.text)")
            #expect(try await asOperator(broker, .GET, "/admin/v1/tenants/x").status == 404)

            // Suspended: alice is refused, and so is acme's admin; the operator still sees the users.
            let suspended = try await asOperator(
                broker,
                .PATCH,
                "/admin/v1/tenants/acme",
                #"{"suspended": true, "name": "Acme Inc."}"#
            )
            #expect(suspended.status == 200 && suspended.json["suspended"] as? Bool == true, "\(suspended.text)")
            let refused = try await broker.send(.GET, "/t/acme/v1/me")
            #expect(
                refused.status == 403
                    && refused.json["type"] as? String == "urn:impulse-broker:problem:tenant-suspended"
            )
            #expect(try await broker.send(.GET, "/t/acme/admin/v1/users", user: "root").status == 403)
            #expect(try await asOperator(broker, .GET, "/t/acme/admin/v1/users").status == 200)
            // Its rows of the due index are parked: nothing of acme is due, globex's rows still are.
            func dueTenants() async throws -> Set<String> {
                Set(try await broker.store.dueSchedules(notAfter: Date(), limit: 100).map(\.tenant.rawValue))
            }
            #expect(try await dueTenants() == ["globex"])
            let resumed = try await asOperator(broker, .PATCH, "/admin/v1/tenants/acme", #"{"suspended": false}"#)
            #expect(resumed.status == 200 && resumed.json["name"] as? String == "Acme Inc.")
            #expect(try await broker.send(.GET, "/t/acme/v1/me").status == 200)
            #expect(try await dueTenants() == ["acme", "globex"])

            // Defaults: quiet hours, the programme's days and the environment of tokens registered without one.
            let defaults = try await asOperator(
                broker,
                .PATCH,
                "/admin/v1/tenants/acme",
                #"{"quietHours": {"start": "21:00", "end": "07:30"}, "weekdays": [1, 2, 3, 4, 5], "apnsEnvironment": "sandbox"}"#
            )
            #expect(defaults.status == 200, "\(defaults.text)")
            #expect(defaults.json["weekdays"] as? [Int] == [1, 2, 3, 4, 5])
            #expect((defaults.json["quietHours"] as? [String: String])?["end"] == "07:30")
            let acme = try #require(try await broker.store.tenant(Fixture.acme))
            #expect(acme.apnsEnvironment == .sandbox && acme.weekdays.days == [1, 2, 3, 4, 5])
            let token = String(repeating: "ab", count: 32)
            let registered = try await broker.send(.PUT, "/t/acme/v1/devices/\(token)", body: #"{"name": "phone"}"#)
            #expect(registered.status == 200 || registered.status == 201, "\(registered.text)")
            #expect(registered.json["environment"] as? String == "sandbox", "\(registered.text)")
            for bad in [#"{"weekdays": []}"#, #"{"weekdays": [8]}"#, #"{"apnsEnvironment": "staging"}"#] {
                let refused = try await asOperator(broker, .PATCH, "/admin/v1/tenants/acme", bad)
                #expect(refused.status == 422 || refused.status == 400, "\(bad): \(refused.text)")
            }
            let cleared = try await asOperator(
                broker,
                .PATCH,
                "/admin/v1/tenants/acme",
                #"{"quietHours": {"start": "00:00", "end": "00:00"}}"#
            )
            #expect(cleared.status == 200 && cleared.json["quietHours"] == nil, "\(cleared.text)")

            // Deleting needs the id repeated; then nothing of the tenant is left.
            let unconfirmed = try await asOperator(broker, .DELETE, "/admin/v1/tenants/globex")
            #expect(unconfirmed.status == 422, "\(unconfirmed.text)")
            #expect(try await broker.send(.GET, "/t/globex/v1/me", password: Fixture.globexAlicePassword).status == 200)
            let deleted = try await asOperator(broker, .DELETE, "/admin/v1/tenants/globex?confirm=globex")
            #expect(deleted.status == 200, "\(deleted.text)")
            let erased = deleted.json["erased"] as? [String: Any]
            #expect(erased?["users"] as? Int == 1 && erased?["impulses"] as? Int == 1, "\(deleted.text)")
            #expect(try await asOperator(broker, .GET, "/admin/v1/tenants/globex").status == 404)
            #expect(try await broker.send(.GET, "/t/globex/v1/me", password: Fixture.globexAlicePassword).status == 404)
            #expect(try await broker.store.users(tenant: Fixture.globex).isEmpty)
        }
    }

    @Test(
        "Users: a tenant admin creates, finds, changes, resets, exports and erases them; caches follow at once",
        arguments: TestDatabase.allCases
    )
    func userLifecycle(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            func admin(_ method: HTTPMethod, _ path: String, _ body: String? = nil) async throws -> TestBroker.Reply {
                try await broker.send(
                    method,
                    "/t/acme/admin/v1" + path,
                    user: "root",
                    headers: Self.json(body),
                    body: body
                )
            }
            let created = try await admin(
                .POST,
                "/users",
                #"{"username": "zoë / 50%", "password": "n3w-pass", "language": "DE", "timeZone": "Europe/Vienna", "lifeAreas": {"work": 20}}"#
            )
            #expect(created.status == 201, "\(created.text)")
            let location = try #require(created.headers["location"].first)
            #expect(location == "/t/acme/admin/v1/users/zo%C3%AB%20%2F%2050%25", "\(location)")
            #expect((created.json["lifeAreas"] as? [String: Int])?["work"] == 20)
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "zoë / 50%", password: "n3w-pass").status == 200)
            let read = try await broker.send(.GET, location, user: "root")
            #expect(read.status == 200 && read.json["username"] as? String == "zoë / 50%", "\(read.text)")
            #expect(read.json["passwordHash"] == nil && !read.text.contains("$2"))

            // Paging and search.
            let page = try await admin(.GET, "/users?limit=2")
            #expect(
                (page.json["items"] as? [[String: Any]])?.compactMap { $0["username"] as? String } == ["alice", "bob"]
            )
            // `next` is a relative URL to follow as it is, as in /v1/impulses.
            let next = try #require(page.json["next"] as? String)
            #expect(next == "/t/acme/admin/v1/users?after=bob&limit=2", "\(next)")
            let rest = try await asOperator(broker, .GET, next)
            #expect(
                (rest.json["items"] as? [[String: Any]])?.compactMap { $0["username"] as? String } == ["carol", "root"]
            )
            let found = try await admin(.GET, "/users?search=ZO")
            #expect((found.json["items"] as? [[String: Any]])?.count == 1)

            // A change that is invalid writes nothing; a valid one takes effect at once (the login cache follows).
            func auditCount() async throws -> Int? { (try await admin(.GET, "/audit").json["items"] as? [Any])?.count }
            let recorded = try await auditCount()
            #expect(
                try await admin(.PATCH, "/users/bob", #"{"timeZone": "Nowhere/Else", "enabled": false}"#).status == 422
            )
            // null is not "leave it": refused, naming the member (the fuzzer found it read as absent).
            let null = try await admin(.PATCH, "/users/bob", #"{"enabled": false, "admin": null}"#)
            #expect(null.status == 400 && null.json["detail"] as? String == "malformed body: admin must not be null")
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "bob").status == 200)
            #expect(try await auditCount() == recorded)
            let disabled = try await admin(.PATCH, "/users/bob", #"{"enabled": false}"#)
            #expect(disabled.status == 200 && disabled.json["enabled"] as? Bool == false)
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "bob").status == 403)

            // A password reset: the old one, verified and cached a moment ago, stops working at once.
            #expect(try await broker.send(.GET, "/t/acme/v1/me").status == 200)
            #expect(try await admin(.PUT, "/users/alice/password", #"{"password": "reset-1"}"#).status == 204)
            #expect(try await broker.send(.GET, "/t/acme/v1/me").status == 401)
            #expect(try await broker.send(.GET, "/t/acme/v1/me", password: "reset-1").status == 200)

            // The export holds her deliveries, and no password hash.
            let export = try await admin(.GET, "/users/alice/export")
            #expect(export.status == 200)
            #expect((export.json["deliveries"] as? [[String: Any]])?.count == Fixture.aliceDeliveries, "\(export.text)")
            #expect(!export.text.contains("$2"))

            // Erased: her login, her ledger and her row are gone.
            let erased = try await admin(.DELETE, "/users/alice")
            #expect(erased.status == 200)
            #expect((erased.json["erased"] as? [String: Any])?["deliveries"] as? Int == Fixture.aliceDeliveries)
            #expect(try await broker.send(.GET, "/t/acme/v1/me", password: "reset-1").status == 401)
            #expect(try await admin(.GET, "/users/alice").status == 404)
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "alice") == nil)
        }
    }

    @Test(
        "A tenant admin reaches only their tenant (401 elsewhere, existing or not), a user who is not an admin none",
        arguments: TestDatabase.allCases
    )
    func isolation(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let elsewhere = try await broker.send(.GET, "/t/globex/admin/v1/users", user: "root")
            // Root's credentials are acme's: in globex there is no such login.
            #expect(elsewhere.status == 401, "\(elsewhere.text)")
            let notAdmin = try await broker.send(.GET, "/t/acme/admin/v1/users", user: "alice")
            #expect(
                notAdmin.status == 403
                    && notAdmin.json["type"] as? String == "urn:impulse-broker:problem:admin-required"
            )
            // The operator's routes are not a tenant admin's.
            #expect(try await broker.send(.GET, "/admin/v1/audit", user: "root").status == 401)
            // A tenant that does not exist answers alike (AdminTenantEnumerationTests).
            #expect(try await broker.send(.GET, "/t/nowhere/admin/v1/users", user: "root").status == 401)
        }
    }

    @Test(
        "Every write is in the audit trail with who, role, tenant, action, target and request id; no secrets",
        arguments: TestDatabase.allCases
    )
    func auditTrail(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let created = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users",
                user: "root",
                headers: [("Content-Type", "application/json"), ("X-Request-ID", "req-42")],
                body: #"{"username": "dave", "password": "sup3r-secret"}"#
            )
            #expect(created.status == 201 && created.headers["x-request-id"].first == "req-42")
            _ = try await asOperator(broker, .PATCH, "/admin/v1/tenants/globex", #"{"name": "Globex Corp"}"#)
            let trail = try await asOperator(broker, .GET, "/admin/v1/audit")
            let items = try #require(trail.json["items"] as? [[String: Any]])
            #expect(items.count == 2, "\(trail.text)")
            #expect(
                items.first?["action"] as? String == "tenant.update" && items.first?["role"] as? String == "operator"
            )
            let creation = try #require(items.last)
            #expect(creation["action"] as? String == "user.create" && creation["actor"] as? String == "root")
            #expect(creation["role"] as? String == "tenant-admin" && creation["tenant"] as? String == "acme")
            #expect(creation["target"] as? String == "user:dave" && creation["requestId"] as? String == "req-42")
            #expect(!trail.text.contains("sup3r-secret"))
            // The tenant admin sees their tenant's part only.
            let own = try await broker.send(.GET, "/t/acme/admin/v1/audit", user: "root")
            #expect((own.json["items"] as? [[String: Any]])?.map { $0["action"] as? String } == ["user.create"])
        }
    }
}

@Suite("Admin API: catalog and deliveries", .timeLimit(.minutes(2)))
struct AdminCatalogTests {
    @Test(
        "A tenant admin imports, replaces and retires impulses (a retired one is never chosen) and delivers one now, pushed",
        arguments: TestDatabase.allCases
    )
    func catalogAndDeliveries(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            func admin(_ method: HTTPMethod, _ path: String, _ body: String? = nil) async throws -> TestBroker.Reply {
                try await broker.send(
                    method,
                    "/t/acme/admin/v1" + path,
                    user: "root",
                    headers: body == nil ? [] : [("Content-Type", "application/json")],
                    body: body
                )
            }
            let item =
                #"{"workingID": "stretch", "language": "EN", "title": "Stretch", "descriptionShort": "S", "description": "D", "duration": 3, "action": "do", "single": true, "lifeArea": "fitness"}"#
            let created = try await admin(.PUT, "/impulses/stretch", item)
            #expect(created.status == 201 && created.json["retired"] as? Bool == false, "\(created.text)")
            let replaced = try await admin(
                .PUT,
                "/impulses/stretch",
                item.replacingOccurrences(of: "Stretch", with: "Stretch well")
            )
            #expect(replaced.status == 200 && replaced.json["title"] as? String == "Stretch well")
            // The body names another impulse, or a media file that is not there: refused, nothing written.
            #expect(try await admin(.PUT, "/impulses/other", item).status == 422)
            let missingMedia = item.replacingOccurrences(
                of: #""single": true"#,
                with: #""single": true, "imageURLs": ["/media/acme/nope.jpg"]"#
            )
            let refused = try await admin(.POST, "/impulses", #"{"items": [\#(missingMedia)]}"#)
            #expect(refused.status == 422 && refused.text.contains("nope.jpg"), "\(refused.text)")
            let imported = try await admin(
                .POST,
                "/impulses",
                #"{"items": [\#(item.replacingOccurrences(of: "stretch", with: "stretch-2"))]}"#
            )
            #expect(imported.status == 200 && imported.json["inserted"] as? Int == 1, "\(imported.text)")

            // Retired: listed as such, never chosen for anyone again.
            let retired = try await admin(.PATCH, "/impulses/acme-1", #"{"retired": true}"#)
            #expect(retired.status == 200 && retired.json["retired"] as? Bool == true)
            let listed = try await admin(.GET, "/impulses")
            let flags = (listed.json["items"] as? [[String: Any]])?.filter { $0["retired"] as? Bool == true }
            #expect(flags?.compactMap { $0["workingID"] as? String } == ["acme-1"])

            // Delivered now: in bob's ledger, and pushed to his device.
            let token = String(repeating: "3c", count: 32)
            let body = #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#
            #expect(try await broker.send(.POST, "/RegisterToken", user: "bob", body: body).status == 204)
            let delivered = try await admin(.POST, "/users/bob/deliveries", #"{"impulse": "stretch"}"#)
            #expect(delivered.status == 201, "\(delivered.text)")
            #expect((delivered.json["impulse"] as? [String: Any])?["workingID"] as? String == "stretch")
            let ledger = try await admin(.GET, "/users/bob/deliveries")
            #expect((ledger.json["items"] as? [[String: Any]])?.count == 1)
            #expect(try await broker.send(.GET, "/v1/impulses/stretch", user: "bob").status == 200)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.contains { $0.token == token } })
            #expect(try await admin(.POST, "/users/bob/deliveries", #"{"impulse": "nothing-like-it"}"#).status == 404)
            let trail = try await admin(.GET, "/audit")
            let actions = (trail.json["items"] as? [[String: Any]])?.compactMap { $0["action"] as? String }
            #expect(
                actions == ["delivery.create", "impulse.retire", "catalog.import", "impulse.put", "impulse.put"],
                "\(actions ?? [])"
            )
        }
    }
}

@Suite("Admin API: tenant ids", .timeLimit(.minutes(2)))
struct AdminTenantEnumerationTests {
    @Test("A tenant that does not exist answers as one whose credentials fail, except to operators")
    func noEnumeration() async throws {
        try await TestBroker.run { broker in
            func get(
                _ tenant: String,
                user: String?,
                headers: [(String, String)] = []
            ) async throws
                -> TestBroker.Reply
            {
                try await broker.send(.GET, "/t/\(tenant)/admin/v1/users", user: user, headers: headers)
            }
            // Acme's admin on globex (which exists) and on nowhere (which does not): the same answer.
            let existing = try await get("globex", user: "root")
            let missing = try await get("nowhere", user: "root")
            #expect(existing.status == 401 && missing.status == 401, "\(existing.status) \(missing.status)")
            #expect(existing.json["detail"] as? String == missing.json["detail"] as? String)
            #expect(existing.headers["www-authenticate"] == missing.headers["www-authenticate"])
            // Without credentials too.
            #expect(try await get("globex", user: nil).status == 401)
            #expect(try await get("nowhere", user: nil).status == 401)
            // An operator may know: 404.
            let operatorView = try await get("nowhere", user: nil, headers: AdminAPITests.bearer)
            #expect(
                operatorView.status == 404
                    && operatorView.json["type"] as? String == "urn:impulse-broker:problem:unknown-tenant"
            )
            // The tenant's own admin is not affected.
            #expect(try await get("acme", user: "root").status == 200)
        }
    }
}
