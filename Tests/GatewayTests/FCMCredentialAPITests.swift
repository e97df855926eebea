import Engine
import Foundation
import NIOHTTP1
import TestSupport
import Testing
import _CryptoExtras

@testable import Gateway

/// FCM service accounts over the admin API: uploaded, checked, sealed at rest, tried by the next Android push and
/// kept only when FCM accepts it (the previous account stays until then, and takes over again when FCM refuses the
/// new one).
@Suite("Admin API: FCM service accounts", .timeLimit(.minutes(3)))
struct FCMCredentialAPITests {
    static let token = "fcm-api-device:APA91b" + String(repeating: "Qq7_", count: 25)

    func account(_ name: String) throws -> FCMServiceAccount {
        FCMServiceAccount(
            projectID: "acme-\(name)",
            clientEmail: "broker@acme-\(name).iam.gserviceaccount.com",
            privateKeyID: "key-\(name)",
            key: try FCMTests.key()
        )
    }

    /// The APNs credential suite's operator request (the operator token, JSON when there is a body).
    func operatorRequest(
        _ broker: TestBroker,
        _ method: HTTPMethod,
        _ path: String,
        _ body: String? = nil
    ) async throws -> TestBroker.Reply {
        try await APNsCredentialAPITests().operatorRequest(broker, method, path, body)
    }

    func upload(_ broker: TestBroker, _ account: FCMServiceAccount) async throws -> TestBroker.Reply {
        let key = String(decoding: account.json(), as: UTF8.self)
        return try await operatorRequest(
            broker,
            .POST,
            "/t/acme/admin/v1/fcm-credentials",
            #"{"serviceAccount": \#(key)}"#
        )
    }

    func state(_ broker: TestBroker, _ id: String, becomes expected: String) async throws -> [String: Any]? {
        var found: [String: Any]?
        _ = try await eventually(seconds: 15) {
            let items = try await operatorRequest(broker, .GET, "/t/acme/admin/v1/fcm-credentials").json["items"]
            found = (items as? [[String: Any]])?.first { $0["id"] as? String == id }
            return found?["state"] as? String == expected
        }
        #expect(found?["state"] as? String == expected, "\(String(describing: found))")
        return found
    }

    /// Delivers an impulse to alice now and waits for the simulator to have accepted `accepted` FCM messages.
    func deliver(_ broker: TestBroker, expecting accepted: Int) async throws -> AcceptedFCMMessage? {
        let simulator = try #require(broker.application.simulator)
        let reply = try await operatorRequest(
            broker,
            .POST,
            "/t/acme/admin/v1/users/alice/deliveries",
            #"{"impulse": "acme-1"}"#
        )
        #expect(reply.status == 201, "\(reply.text)")
        let arrived = try await eventually(seconds: 15) { simulator.fcmAccepted.count >= accepted }
        #expect(arrived, "accepted \(simulator.fcmCounts)")
        return simulator.fcmAccepted.last
    }

    @Test(
        "A new service account is tried by the next Android push and kept once FCM accepts it; a refused one leaves the old in place",
        arguments: TestDatabase.allCases
    )
    func rotation(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database, fcm: .embeddedSimulator) { broker in
            let simulator = try #require(broker.application.simulator)
            let second = try account("second")
            simulator.setFCMAccount(
                second.clientEmail,
                FCMSimulatedAccount(projectID: second.projectID, publicKey: second.publicKey)
            )
            let device = try await broker.send(
                .PUT,
                "/v1/devices/\(Self.token)",
                body: #"{"name": "Pixel", "platform": "fcm"}"#
            )
            #expect(device.status == 201, "\(device.text)")
            // The broker's default account pushes first.
            #expect(try await deliver(broker, expecting: 1)?.project == "impulse-simulated")

            let uploaded = try await upload(broker, second)
            #expect(uploaded.status == 201, "\(uploaded.text)")
            #expect(uploaded.json["state"] as? String == "pending")
            #expect(uploaded.json["projectID"] as? String == "acme-second")
            #expect(uploaded.json["clientEmail"] as? String == second.clientEmail)
            #expect(!uploaded.text.contains("PRIVATE KEY") && !uploaded.text.contains("private_key"))
            let secondID = try #require(uploaded.json["id"] as? String)
            // The next push goes out with it; FCM accepts it, so it is the tenant's account now.
            #expect(try await deliver(broker, expecting: 2)?.project == "acme-second")
            let proven = try await state(broker, secondID, becomes: "active")
            #expect(proven?["activatedAt"] is String)
            let inspect = try await broker.send(.GET, "/v1/admin/inspect", user: "root")
            let fcm = (inspect.json["tenants"] as? [[String: Any]])?.first?["fcm"] as? [String: Any]
            #expect(fcm?["identity"] as? String == "uploaded" && fcm?["project"] as? String == "acme-second")

            // An account the token endpoint does not know: refused at the first push, which goes out again with
            // the active account.
            let unknown = try account("unknown")
            let refused = try await upload(broker, unknown)
            #expect(refused.status == 201, "\(refused.text)")
            let unknownID = try #require(refused.json["id"] as? String)
            #expect(try await deliver(broker, expecting: 3)?.project == "acme-second")
            let failed = try await state(broker, unknownID, becomes: "failed")
            #expect(failed?["lastError"] as? String == "invalid_grant")
            #expect(try await state(broker, secondID, becomes: "active") != nil)

            // Sealed at rest; the audit names ids only; APNs' credentials are another list.
            let stored = try await broker.store.apnsCredentials(tenant: Fixture.acme, channel: .fcm)
            #expect(
                stored.count == 2
                    && stored.allSatisfy { !$0.sealed.contains("PRIVATE") && !$0.sealed.contains("broker@") }
            )
            #expect(try await broker.store.apnsCredentials(tenant: Fixture.acme).isEmpty)
            let audit = try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 50)
            #expect(audit.filter { $0.action == "fcm-credential.upload" }.count == 2)
            #expect(
                try await operatorRequest(broker, .GET, "/t/acme/admin/v1/apns-credentials/\(secondID)").status == 404
            )

            // Deleting the active one: the default account pushes again.
            #expect(
                try await operatorRequest(broker, .DELETE, "/t/acme/admin/v1/fcm-credentials/\(secondID)").status == 204
            )
            #expect(try await deliver(broker, expecting: 4)?.project == "impulse-simulated")
        }
    }

    @Test("Bad service accounts are refused naming the field; without a credential key nothing is stored")
    func refusals() async throws {
        try await TestBroker.run(fcm: .embeddedSimulator) { broker in
            let good = try JSONSerialization.jsonObject(with: try account("x").json()) as? [String: Any] ?? [:]
            func upload(_ object: [String: Any]) async throws -> TestBroker.Reply {
                let key = String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
                return try await operatorRequest(
                    broker,
                    .POST,
                    "/t/acme/admin/v1/fcm-credentials",
                    #"{"serviceAccount": \#(key)}"#
                )
            }
            var noKey = good
            noKey["private_key"] = nil
            let missing = try await upload(noKey)
            #expect(missing.status == 422 && missing.text.contains("private_key"), "\(missing.text)")
            var badKey = good
            badKey["private_key"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            let bad = try await upload(badKey)
            #expect(bad.status == 422 && !bad.text.contains("AAAA"), "\(bad.text)")
            let text = String(decoding: try account("x").json(), as: UTF8.self)
            let asText = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/fcm-credentials",
                try String(decoding: JSONSerialization.data(withJSONObject: ["serviceAccount": text]), as: UTF8.self)
            )
            #expect(asText.status == 201, "\(asText.text)")
            let unknownMember = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/fcm-credentials",
                #"{"serviceAccount": "{}", "extra": 1}"#
            )
            #expect(unknownMember.status == 400 && unknownMember.text.contains("unknown-member"))
        }
        try await TestBroker.run(fcm: .embeddedSimulator, credentialKey: nil) { broker in
            let key = String(decoding: try account("y").json(), as: UTF8.self)
            let reply = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/fcm-credentials",
                #"{"serviceAccount": \#(key)}"#
            )
            #expect(reply.status == 409, "\(reply.text)")
        }
    }
}
