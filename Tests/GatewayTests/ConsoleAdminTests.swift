import Crypto
import Engine
import Foundation
import TestSupport
import Testing

@testable import Gateway

/// The console's management pages over HTTP (the browser test drives the same forms): devices and APNs with its
/// credentials, webhooks, and the operators' tenants and node pages, each on the admin API's rules.
@Suite("Console management pages", .timeLimit(.minutes(3)))
struct ConsoleAdminTests {
    @Test("Devices and APNs: counts by state, this node's connections, credentials for whoever manages them")
    func devicesAndCredentials() async throws {
        try await TestBroker.run { broker in
            let token = String(repeating: "cd", count: 32)
            let device = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(token)",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "sandbox"}"#
            )
            #expect((200..<300).contains(device.status), "\(device.text)")
            let admin = try await ConsoleClient.signIn(broker)
            let page = try await admin.get("/t/acme/console/devices")
            #expect(page.status == 200, "\(page.text)")
            #expect(page.text.contains("<td>sandbox</td><td class=\"num\">1</td>"), "\(page.text)")
            #expect(page.text.contains("APNs on this node"))
            // A tenant admin without the operator's leave sees no credentials and may not upload one.
            #expect(page.text.contains("An operator manages this programme's APNs credentials."))
            let key = P256.Signing.PrivateKey()
            let fields = [("teamID", "TEAM000001"), ("keyID", "KEYCONSOLE"), ("privateKey", key.pemRepresentation)]
            let refused = try await admin.post("/t/acme/console/devices/credentials", fields)
            #expect(refused.status == 403 && refused.text.contains("an operator manages"), "\(refused.text)")
            // An operator uploads one; a bad one is refused with the reason; the uploaded one can be deleted.
            let ops = try await ConsoleClient.signInOperator(broker)
            let uploaded = try await ops.post("/t/acme/console/devices/credentials", fields)
            #expect(uploaded.status == 201 && uploaded.text.contains("KEYCONSOLE is uploaded"), "\(uploaded.text)")
            #expect(uploaded.text.contains("<td>pending</td>") && !uploaded.text.contains("PRIVATE KEY"))
            let broken = try await ops.post(
                "/t/acme/console/devices/credentials",
                [("teamID", "TEAM000001"), ("keyID", "KEYBROKEN1"), ("privateKey", "not a key")]
            )
            #expect(broken.status == 422, "\(broken.status) \(broken.text)")
            let listed = try await broker.send(
                .GET,
                "/t/acme/admin/v1/apns-credentials",
                user: nil,
                headers: [("Authorization", "Bearer \(Fixture.operatorToken)")]
            )
            let items = try #require(listed.json["items"] as? [[String: Any]])
            #expect(items.count == 1 && items[0]["keyID"] as? String == "KEYCONSOLE")
            let id = try #require(items[0]["id"] as? String)
            let deleted = try await ops.post("/t/acme/console/devices/credentials/\(id)/delete")
            #expect(deleted.status == 200 && deleted.text.contains("The credential is deleted."))
        }
    }

    @Test("Devices and FCM: Android phones counted apart, this node's FCM pool, service accounts uploaded and deleted")
    func fcmServiceAccounts() async throws {
        try await TestBroker.run(fcm: .embeddedSimulator) { broker in
            let token = "console-android:APA91b" + String(repeating: "Rr5-", count: 20)
            let device = try await broker.send(
                .PUT,
                "/v1/devices/\(token)",
                body: #"{"name": "Pixel", "platform": "fcm"}"#
            )
            #expect(device.status == 201, "\(device.text)")
            #expect(try await broker.sendPush("command=send&impulse=acme-3&target=alice").status == 200)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.fcmAccepted.count == 1 })
            let ops = try await ConsoleClient.signInOperator(broker)
            let page = try await ops.get("/t/acme/console/devices")
            #expect(page.status == 200, "\(page.text)")
            #expect(
                page.text.contains("<td>Android (FCM)</td><td>com.acme.impulse</td><td>production</td>"),
                "\(page.text)"
            )
            #expect(page.text.contains("FCM on this node") && page.text.contains("<td>impulse-simulated</td>"))
            #expect(page.text.contains("None uploaded: Android pushes use the broker's configured account."))
            let account = FCMServiceAccount(
                projectID: "acme-console",
                clientEmail: "console@acme-console.iam.gserviceaccount.com",
                privateKeyID: "k1",
                key: try FCMTests.key()
            )
            let uploaded = try await ops.post(
                "/t/acme/console/devices/fcm-credentials",
                [("serviceAccount", String(decoding: account.json(), as: UTF8.self))]
            )
            #expect(uploaded.status == 201, "\(uploaded.text)")
            #expect(uploaded.text.contains("console@acme-console.iam.gserviceaccount.com of acme-console is uploaded"))
            #expect(uploaded.text.contains("<td>pending</td>") && !uploaded.text.contains("PRIVATE KEY"))
            let broken = try await ops.post(
                "/t/acme/console/devices/fcm-credentials",
                [("serviceAccount", #"{"type": "service_account", "project_id": "acme-console"}"#)]
            )
            #expect(broken.status == 422 && broken.text.contains("client_email"), "\(broken.status) \(broken.text)")
            let stored = try await broker.store.apnsCredentials(tenant: Fixture.acme, channel: .fcm)
            let id = try #require(stored.first?.id)
            #expect(stored.count == 1)
            let deleted = try await ops.post("/t/acme/console/devices/fcm-credentials/\(id)/delete")
            #expect(deleted.status == 200 && deleted.text.contains("The credential is deleted."))
            #expect(try await broker.store.apnsCredentials(tenant: Fixture.acme, channel: .fcm).isEmpty)
            // A tenant admin without the operator's leave sees no service accounts and may not upload one.
            let admin = try await ConsoleClient.signIn(broker)
            #expect(
                try await admin.get("/t/acme/console/devices").text.contains("An operator manages this programme's FCM")
            )
            let refused = try await admin.post(
                "/t/acme/console/devices/fcm-credentials",
                [("serviceAccount", String(decoding: account.json(), as: UTF8.self))]
            )
            #expect(refused.status == 403)
        }
    }

    @Test(
        "Webhooks: register (the secret shown once), refuse a bad address keeping what was typed, turn off, rotate, delete"
    )
    func webhooks() async throws {
        try await TestBroker.run { broker in
            let admin = try await ConsoleClient.signIn(broker)
            let bad = try await admin.post(
                "/t/acme/console/webhooks",
                [("url", "http://hooks.example.com/in"), ("event.delivery.read", "on")]
            )
            #expect(bad.status == 422 && bad.text.contains("https"), "\(bad.text)")
            #expect(bad.text.contains(#"value="http://hooks.example.com/in""#))
            let created = try await admin.post(
                "/t/acme/console/webhooks",
                [("url", "https://hooks.example.com/in"), ("event.delivery.read", "on"), ("event.user.created", "on")]
            )
            #expect(created.status == 201, "\(created.text)")
            let secret = try #require(
                created.text.components(separatedBy: "signing secret is ").dropFirst().first?.split(separator: " ")
                    .first
            )
            #expect(secret.hasPrefix("whsec_"))
            let listed = try await broker.send(.GET, "/t/acme/admin/v1/webhooks", user: "root")
            let endpoint = try #require((listed.json["items"] as? [[String: Any]])?.first)
            #expect(endpoint["events"] as? [String] == ["delivery.read", "user.created"])
            let id = try #require(endpoint["id"] as? String)
            // The secret is not on the page once it is shown.
            #expect(try await admin.get("/t/acme/console/webhooks").text.contains(String(secret)) == false)
            let off = try await admin.post("/t/acme/console/webhooks/\(id)/enabled", [("enabled", "false")])
            #expect(off.status == 200 && off.text.contains("is off"))
            let shown = try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root")
            #expect(shown.json["enabled"] as? Bool == false)
            let rotated = try await admin.post("/t/acme/console/webhooks/\(id)/secret")
            #expect(
                rotated.status == 200 && rotated.text.contains("new signing secret") && !rotated.text.contains(secret)
            )
            let deleted = try await admin.post("/t/acme/console/webhooks/\(id)/delete")
            #expect(deleted.status == 200 && deleted.text.contains("No endpoints."))
            let again = try await admin.post("/t/acme/console/webhooks/\(id)/delete")
            #expect(again.status == 404)
        }
    }

    @Test("Operators create a tenant with its first admin, suspend and resume it, grant credentials, delete it")
    func tenants() async throws {
        try await TestBroker.run { broker in
            let ops = try await ConsoleClient.signInOperator(broker)
            let bad = try await ops.post("/console/tenants", [("id", "Not An Id"), ("name", "Initech")])
            #expect(bad.status == 422 && bad.text.contains(#"value="Initech""#), "\(bad.text)")
            let created = try await ops.post(
                "/console/tenants",
                [
                    ("id", "initech"), ("name", "Initech"), ("timeZone", "America/Chicago"),
                    ("apnsTopic", "com.initech.impulse"), ("apnsEnvironment", "sandbox"),
                    ("adminUsername", "boss"), ("adminPassword", "b0ss-secret-1"),
                ]
            )
            #expect(created.status == 201 && created.text.contains("boss signs in at /t/initech/console"))
            // The new admin signs in to the new tenant's console.
            let boss = try await ConsoleClient.signIn(
                broker,
                tenant: "initech",
                name: "boss",
                password: "b0ss-secret-1"
            )
            #expect(try await boss.get("/t/initech/console/users").text.contains("boss"))
            // A tenant admin's session does not open the operators' pages or forms: they ask for an operator.
            #expect(try await boss.get("/console/node").status == 303)
            #expect(try await boss.post("/console/tenants/initech/suspended", [("suspended", "true")]).status == 303)
            let suspended = try await ops.post("/console/tenants/initech/suspended", [("suspended", "true")])
            #expect(suspended.status == 200 && suspended.text.contains("Initech is suspended"))
            let tenant = { () async throws -> [String: Any] in
                try await broker.send(
                    .GET,
                    "/admin/v1/tenants/initech",
                    user: nil,
                    headers: [("Authorization", "Bearer \(Fixture.operatorToken)")]
                ).json
            }
            #expect(try await tenant()["suspended"] as? Bool == true)
            _ = try await ops.post("/console/tenants/initech/suspended", [("suspended", "false")])
            #expect(try await tenant()["suspended"] as? Bool == false)
            let granted = try await ops.post("/console/tenants/initech/credentials", [("allowed", "true")])
            #expect(granted.text.contains("admins may now manage its APNs credentials"))
            #expect(try await tenant()["adminsManageAPNsCredentials"] as? Bool == true)
            // Deleting needs the id typed again.
            let unconfirmed = try await ops.post("/console/tenants/initech/delete", [("confirm", "initec")])
            #expect(unconfirmed.status == 422 && unconfirmed.text.contains("confirm"))
            let deleted = try await ops.post("/console/tenants/initech/delete", [("confirm", "initech")])
            #expect(deleted.status == 200 && deleted.text.contains("initech is deleted: 1 users"), "\(deleted.text)")
            #expect(try await tenant()["id"] == nil)
            // The trail keeps who did it, from the console.
            let audit = try await broker.send(
                .GET,
                "/admin/v1/audit?limit=20",
                user: nil,
                headers: [("Authorization", "Bearer \(Fixture.operatorToken)")]
            )
            for action in ["tenant.create", "tenant.suspend", "tenant.resume", "tenant.delete"] {
                #expect(audit.text.contains(action), "\(action)")
            }
        }
    }

    @Test("The node page shows /inspect to operators; today's page shows progress and what is wrong now")
    func nodeAndToday() async throws {
        try await TestBroker.run { broker in
            let ops = try await ConsoleClient.signInOperator(broker)
            let node = try await ops.get("/console/node")
            #expect(
                node.status == 200 && node.text.contains("Tenants on this node") && node.text.contains("<td>acme</td>")
            )
            #expect(node.text.contains(#"http-equiv="refresh" content="10""#))
            // A delivery assigned now shows in today's progress.
            let delivered = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users/alice/deliveries",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"impulse": "acme-3"}"#
            )
            #expect(delivered.status == 201, "\(delivered.text)")
            let admin = try await ConsoleClient.signIn(broker)
            #expect(
                try await eventually {
                    let today = try await admin.get("/t/acme/console")
                    return today.text.contains(#"<progress id="progress-pushed" max="1" value="1""#)
                        && today.text.contains("Deliveries assigned: 1 ")
                }
            )
        }
    }

    @Test("Sign out everywhere ends every session of the account; a new password ends them too")
    func revocation() async throws {
        try await TestBroker.run { broker in
            let first = try await ConsoleClient.signIn(broker)
            let second = try await ConsoleClient.signIn(broker)
            let out = try await first.post("/console/sign-out-everywhere")
            #expect(out.status == 303 && out.headers["location"].first == "/t/acme/console/sign-in")
            #expect(try await second.get("/t/acme/console").status == 303)
            let third = try await ConsoleClient.signIn(broker)
            #expect(try await third.get("/t/acme/console").status == 200)
            let reset = try await broker.send(
                .PUT,
                "/t/acme/admin/v1/users/root/password",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"password": "n3w-root-passw0rd"}"#
            )
            #expect(reset.status == 204, "\(reset.text)")
            #expect(try await third.get("/t/acme/console").status == 303)
        }
    }
}
