import AsyncHTTPClient
import Crypto
import Engine
import Foundation
import NIOHTTP1
import NIOSSL
import TestSupport
import Testing

@testable import Gateway

/// APNs credentials over the admin API: uploaded, checked, sealed at rest, tried by the next push and kept only
/// when APNs accepts it (the previous one stays until then, and takes over again when APNs refuses the new one),
/// on this node at once and on another through the change feed.
@Suite("Admin API: APNs credentials", .timeLimit(.minutes(3)))
struct APNsCredentialAPITests {
    static let token = String(repeating: "ab", count: 32)

    struct Key {
        let teamID = "TEAM000001"
        let keyID: String
        let key = P256.Signing.PrivateKey()
        var pem: String { key.pemRepresentation }
        var identity: APNsSigningIdentity { APNsSigningIdentity(teamID: teamID, keyID: keyID, key: key) }
        var body: String {
            let escaped = pem.replacingOccurrences(of: "\n", with: "\\n")
            return #"{"teamID": "\#(teamID)", "keyID": "\#(keyID)", "privateKey": "\#(escaped)"}"#
        }
    }

    /// A simulator that knows `keys`, and the broker's APNs setup pushing to it with `configured` as the default.
    static func simulator(knowing keys: [Key], configured: Key) async throws -> (APNsSimulator, APNsSetup) {
        let (serverTLS, clientTLS) = try EnginePair.tls()
        let simulator = APNsSimulator(
            configuration: APNsSimulatorConfiguration(
                tls: serverTLS,
                keys: Dictionary(uniqueKeysWithValues: keys.map { ($0.keyID, $0.identity.publicKey) })
            )
        )
        let port = try await simulator.start()
        let endpoint = APNsEndpoint(host: "127.0.0.1", port: port, tls: clientTLS, serverHostname: "localhost")
        return (
            simulator,
            .external(
                endpoints: [.production: endpoint, .sandbox: endpoint],
                defaultIdentity: .token(configured.identity),
                identities: [:]
            )
        )
    }

    func operatorRequest(
        _ broker: TestBroker,
        _ method: HTTPMethod,
        _ path: String,
        _ body: String? = nil
    ) async throws -> TestBroker.Reply {
        try await broker.send(
            method,
            path,
            user: nil,
            headers: [("Authorization", "Bearer \(Fixture.operatorToken)")]
                + (body == nil ? [] : [("Content-Type", "application/json")]),
            body: body
        )
    }

    func credentials(_ broker: TestBroker) async throws -> [[String: Any]] {
        try await operatorRequest(broker, .GET, "/t/acme/admin/v1/apns-credentials").json["items"] as? [[String: Any]]
            ?? []
    }

    /// Delivers an impulse to alice now and waits for the simulator to have accepted `accepted` pushes in all.
    func deliver(_ broker: TestBroker, _ simulator: APNsSimulator, expecting accepted: Int) async throws {
        let reply = try await operatorRequest(
            broker,
            .POST,
            "/t/acme/admin/v1/users/alice/deliveries",
            #"{"impulse": "acme-1"}"#
        )
        #expect(reply.status == 201, "\(reply.text)")
        let arrived = try await eventually(seconds: 15) { simulator.counts.accepted >= accepted }
        #expect(arrived, "accepted \(simulator.counts)")
    }

    func state(_ broker: TestBroker, _ id: String, becomes expected: String) async throws -> [String: Any]? {
        var found: [String: Any]?
        _ = try await eventually(seconds: 15) {
            found = try await credentials(broker).first { $0["id"] as? String == id }
            return found?["state"] as? String == expected
        }
        #expect(found?["state"] as? String == expected, "\(String(describing: found))")
        return found
    }

    @Test(
        "A new key is tried by the next push and replaces the old one once accepted; a refused one leaves the old in place",
        arguments: TestDatabase.allCases
    )
    func rotation(_ database: TestDatabase) async throws {
        let configured = Key(keyID: "KEYCONFIG1")
        let second = Key(keyID: "KEYSECOND1")
        let unknown = Key(keyID: "KEYUNKNOWN")
        let (simulator, apns) = try await Self.simulator(knowing: [configured, second], configured: configured)
        defer { Task { await simulator.stop() } }
        try await TestBroker.run(database: database, apns: apns) { broker in
            let device = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(Self.token)",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "production"}"#
            )
            #expect((200..<300).contains(device.status), "\(device.text)")
            // The configuration's key pushes.
            try await deliver(broker, simulator, expecting: 1)

            let uploaded = try await operatorRequest(broker, .POST, "/t/acme/admin/v1/apns-credentials", second.body)
            #expect(uploaded.status == 201, "\(uploaded.text)")
            #expect(uploaded.json["state"] as? String == "pending" && uploaded.json["keyID"] as? String == "KEYSECOND1")
            #expect(!uploaded.text.contains("PRIVATE KEY") && !uploaded.text.contains("privateKey"))
            let secondID = try #require(uploaded.json["id"] as? String)
            // The next push goes out with it; APNs accepts it, so it is the tenant's credential now.
            try await deliver(broker, simulator, expecting: 2)
            let proven = try await state(broker, secondID, becomes: "active")
            #expect(proven?["activatedAt"] is String)

            // A key APNs does not know: refused on the first push, which goes out again with the active key.
            let refused = try await operatorRequest(broker, .POST, "/t/acme/admin/v1/apns-credentials", unknown.body)
            #expect(refused.status == 201, "\(refused.text)")
            let unknownID = try #require(refused.json["id"] as? String)
            try await deliver(broker, simulator, expecting: 3)
            let failed = try await state(broker, unknownID, becomes: "failed")
            #expect(failed?["lastError"] as? String == "InvalidProviderToken")
            #expect(try await state(broker, secondID, becomes: "active") != nil)
            try await deliver(broker, simulator, expecting: 4)

            // Sealed at rest: the store holds neither the PEM nor its base64 body; the audit names ids only.
            let stored = try await broker.store.apnsCredentials(tenant: Fixture.acme)
            let keyBody = second.pem.split(separator: "\n").dropFirst().first.map(String.init) ?? "?"
            #expect(
                stored.count == 2
                    && stored.allSatisfy { !$0.sealed.contains(keyBody) && !$0.sealed.contains("PRIVATE") }
            )
            let audit = try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 50)
            #expect(audit.filter { $0.action == "apns-credential.upload" }.count == 2)
            #expect(audit.allSatisfy { !$0.target.contains("PRIVATE") })

            // Deleting the active one: the configuration's key pushes again.
            #expect(
                try await operatorRequest(broker, .DELETE, "/t/acme/admin/v1/apns-credentials/\(secondID)").status
                    == 204
            )
            #expect(
                try await operatorRequest(broker, .GET, "/t/acme/admin/v1/apns-credentials/\(secondID)").status == 404
            )
            try await deliver(broker, simulator, expecting: 5)
        }
    }

    @Test("Another node's upload reaches this node's pushes through the change feed")
    func otherNode() async throws {
        let configured = Key(keyID: "KEYCONFIG1")
        let second = Key(keyID: "KEYSECOND1")
        let (simulator, apns) = try await Self.simulator(knowing: [configured, second], configured: configured)
        defer { Task { await simulator.stop() } }
        try await TestBroker.run(apns: apns) { broker in
            _ = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(Self.token)",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "production"}"#
            )
            // Another process on the same store: the command line, or a second node.
            let other = try await SQLiteStore(
                configuration: .init(path: broker.directory + "/broker.sqlite"),
                logger: TestBroker.logger
            )
            let administration = Administration(store: other, hashPassword: { password, _ in password })
            let credential = try await administration.uploadAPNsCredential(
                tenant: Fixture.acme,
                .token(teamID: second.teamID, keyID: second.keyID, privateKeyPEM: second.pem),
                inspector: APNsCredentialVault(key: Fixture.credentialKey),
                by: .commandLine
            )
            await other.close()
            // This node loads it from the feed, tries it with the next push, and records it proven.
            _ = try await eventually(seconds: 5) { broker.application.transport?.hasOwnIdentity(Fixture.acme) == true }
            try await deliver(broker, simulator, expecting: 1)
            _ = try await state(broker, credential.id, becomes: "active")
        }
    }

    /// A PKCS#12 bundle as the Keychain exports it (passphrase `sekrit`), the app's topic in the subject's UID, in
    /// base64; its certificate and key stay in `directory` as `<uid>.crt` and `<uid>.key`.
    static func bundle(_ directory: String, uid: String) async throws -> String {
        let name = directory + "/" + uid
        for arguments in [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                "-subj", "/UID=\(uid)/CN=Apple Push Services: \(uid)", "-keyout", name + ".key", "-out",
                name + ".crt",
            ],
            [
                "pkcs12", "-export", "-in", name + ".crt", "-inkey", name + ".key", "-out", name + ".p12",
                "-passout", "pass:sekrit",
            ],
        ] {
            let openssl = Process()
            openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            openssl.arguments = arguments
            openssl.standardError = FileHandle.nullDevice
            try openssl.run()
            await openssl.exited()
            try #require(openssl.terminationStatus == 0)
        }
        return try Data(contentsOf: URL(fileURLWithPath: name + ".p12")).base64EncodedString()
    }

    @Test("A certificate APNs turns away at the handshake is refused after two rounds; the old one pushes")
    func certificateTurnedAway() async throws {
        let directory = TestBroker.temporaryDirectory()
        // The configured certificate is the only one the server trusts.
        let (configuredPEM, configuredKeyPEM) = try SelfSignedCertificate.make(hostnames: ["provider.example"])
        let configured = try NIOSSLCertificate(bytes: Array(configuredPEM.utf8), format: .pem)
        var (serverTLS, clientTLS) = try EnginePair.tls()
        serverTLS.certificateVerification = .noHostnameVerification
        serverTLS.trustRoots = .certificates([configured])
        let simulator = APNsSimulator(configuration: APNsSimulatorConfiguration(tls: serverTLS))
        let port = try await simulator.start()
        defer { Task { await simulator.stop() } }
        let endpoint = APNsEndpoint(host: "127.0.0.1", port: port, tls: clientTLS, serverHostname: "localhost")
        let apns = APNsSetup.external(
            endpoints: [.production: endpoint, .sandbox: endpoint],
            defaultIdentity: .certificate(
                chain: [.certificate(configured)],
                key: .privateKey(try NIOSSLPrivateKey(bytes: Array(configuredKeyPEM.utf8), format: .pem))
            ),
            identities: [:]
        )
        try await TestBroker.run(apns: apns) { broker in
            _ = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(Self.token)",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "production"}"#
            )
            try await deliver(broker, simulator, expecting: 1)
            let bundle = try await Self.bundle(directory, uid: "com.acme.impulse")
            let uploaded = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/apns-credentials",
                #"{"pkcs12": "\#(bundle)", "passphrase": "sekrit"}"#
            )
            #expect(uploaded.status == 201, "\(uploaded.text)")
            let id = try #require(uploaded.json["id"] as? String)
            // Its pushes never reach APNs; after two rounds (ten seconds each) it is refused, and they go out with the configured one.
            let reply = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/users/alice/deliveries",
                #"{"impulse": "acme-2"}"#
            )
            #expect(reply.status == 201, "\(reply.text)")
            #expect(try await eventually(seconds: 60) { simulator.counts.accepted >= 2 }, "\(simulator.counts)")
            let failed = try await state(broker, id, becomes: "failed")
            #expect(failed?["lastError"] as? String == "ConnectionFailed")
        }
    }

    @Test("Uploads are checked: ids, PEM, PKCS#12 passphrase and topic, who may; no credential key, no upload")
    func validation() async throws {
        try await TestBroker.run { broker in
            let key = Key(keyID: "KEYCHECK01")
            let path = "/t/acme/admin/v1/apns-credentials"
            let directory = TestBroker.temporaryDirectory()
            for body in [
                key.body.replacingOccurrences(of: "TEAM000001", with: "team1"),
                key.body.replacingOccurrences(of: "BEGIN PRIVATE KEY", with: "BEGIN NOTHING"),
                #"{"teamID": "TEAM000001"}"#,
                #"{"pkcs12": "not base64 !!"}"#,
            ] {
                let reply = try await operatorRequest(broker, .POST, path, body)
                #expect(reply.status == 422 || reply.status == 400, "\(body): \(reply.status) \(reply.text)")
                #expect(!reply.text.contains("PRIVATE KEY"))
            }

            let good = try await Self.bundle(directory, uid: "com.acme.impulse")
            let certificate = try await operatorRequest(
                broker,
                .POST,
                path,
                #"{"pkcs12": "\#(good)", "passphrase": "sekrit"}"#
            )
            #expect(certificate.status == 201, "\(certificate.text)")
            #expect(certificate.json["kind"] as? String == "certificate")
            #expect(certificate.json["topics"] as? [String] == ["com.acme.impulse"])
            #expect(certificate.json["notAfter"] is String)
            let wrongPassphrase = try await operatorRequest(
                broker,
                .POST,
                path,
                #"{"pkcs12": "\#(good)", "passphrase": "guess"}"#
            )
            #expect(
                wrongPassphrase.status == 422 && wrongPassphrase.text.contains("passphrase"),
                "\(wrongPassphrase.text)"
            )
            let otherApp = try await operatorRequest(
                broker,
                .POST,
                path,
                #"{"pkcs12": "\#(try await Self.bundle(directory, uid: "com.other.app"))", "passphrase": "sekrit"}"#
            )
            #expect(otherApp.status == 422 && otherApp.text.contains("com.acme.impulse"), "\(otherApp.text)")

            // A tenant admin may only when an operator allows it.
            #expect(try await broker.send(.GET, path, user: "root").status == 403)
            #expect(
                try await broker.send(
                    .POST,
                    path,
                    user: "root",
                    headers: [("Content-Type", "application/json")],
                    body: key.body
                ).status == 403
            )
            let allowed = try await operatorRequest(
                broker,
                .PATCH,
                "/admin/v1/tenants/acme",
                #"{"adminsManageAPNsCredentials": true}"#
            )
            #expect(allowed.status == 200 && allowed.json["adminsManageAPNsCredentials"] as? Bool == true)
            let byAdmin = try await broker.send(
                .POST,
                path,
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: key.body
            )
            #expect(byAdmin.status == 201, "\(byAdmin.text)")
            // Uploading again replaces the pending one: one pending at most.
            let stored = try await broker.store.apnsCredentials(tenant: Fixture.acme)
            #expect(stored.filter { $0.state == .pending }.count == 1)
            #expect(try await broker.send(.GET, "/t/globex/admin/v1/apns-credentials", user: "root").status != 200)
        }
        try await TestBroker.run(credentialKey: nil) { broker in
            let reply = try await operatorRequest(
                broker,
                .POST,
                "/t/acme/admin/v1/apns-credentials",
                Key(keyID: "KEYCHECK01").body
            )
            #expect(reply.status == 409 && reply.text.contains("credential key"), "\(reply.text)")
        }
    }

    @Test("A credential this broker's key does not open shows as unreadable, not as the store's state")
    func unreadable() async throws {
        try await TestBroker.run { broker in
            // Sealed under another key (a node configured with a different credential key, or a key replaced).
            let other = try await SQLiteStore(
                configuration: .init(path: broker.directory + "/broker.sqlite"),
                logger: TestBroker.logger
            )
            let key = Key(keyID: "KEYOTHER01")
            let credential = try await Administration(store: other, hashPassword: { password, _ in password })
                .uploadAPNsCredential(
                    tenant: Fixture.acme,
                    .token(teamID: key.teamID, keyID: key.keyID, privateKeyPEM: key.pem),
                    inspector: APNsCredentialVault(key: Array(repeating: 9, count: 32)),
                    by: .commandLine
                )
            await other.close()
            #expect(credential.state == .pending)
            let shown = try await operatorRequest(broker, .GET, "/t/acme/admin/v1/apns-credentials/\(credential.id)")
            #expect(shown.json["state"] as? String == "unreadable", "\(shown.text)")
            #expect((shown.json["lastError"] as? String ?? "").contains("credential key"))
        }
    }
}
