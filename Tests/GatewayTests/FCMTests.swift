import Engine
import Foundation
import NIOCore
import NIOSSL
import Synchronization
import TestSupport
import Testing
import _CryptoExtras

@testable import Gateway

/// A simulator speaking FCM (and APNs) over TLS on loopback, a service account it knows, and an FCM transport.
struct FCMPair {
    let simulator: APNsSimulator
    let account: FCMServiceAccount
    let transport: FCMPushTransport
    let endpoint: PushEndpoint
    let port: Int

    static let tenant = try! TenantID("acme")
    static let project = "acme-wellbeing"

    static func start(
        deadline: Duration = .seconds(5),
        unreachableWait: Duration = .seconds(60)
    ) async throws -> FCMPair {
        let (serverTLS, clientTLS) = try EnginePair.tls()
        let simulator = APNsSimulator(configuration: APNsSimulatorConfiguration(tls: serverTLS))
        let port = try await simulator.start()
        let account = FCMServiceAccount(
            projectID: project,
            clientEmail: "broker@\(project).iam.gserviceaccount.com",
            privateKeyID: "key-1",
            tokenURI: URL(string: "https://127.0.0.1:\(port)/token")!,
            key: try FCMTests.key()
        )
        simulator.setFCMAccount(
            account.clientEmail,
            FCMSimulatedAccount(projectID: project, publicKey: account.publicKey)
        )
        let endpoint = PushEndpoint(host: "127.0.0.1", port: port, tls: clientTLS, serverHostname: "localhost")
        let transport = FCMPushTransport(
            endpoint: endpoint,
            accounts: [tenant: account],
            logger: TestBroker.logger
        ) {
            HTTP2PushClientConfiguration(
                host: $0.host,
                port: $0.port,
                tls: $0.tls,
                serverHostname: $0.serverHostname,
                requestDeadline: deadline,
                unreachableWait: unreachableWait
            )
        }
        return FCMPair(simulator: simulator, account: account, transport: transport, endpoint: endpoint, port: port)
    }

    func push(_ n: Int, token: String? = nil, expiresIn: TimeInterval? = 3600) throws -> OutboundPush {
        OutboundPush(
            tenant: Self.tenant,
            delivery: DeliveryID(Int64(n)),
            device: try Device(
                tenant: Self.tenant,
                topic: "com.acme.impulse",
                token: DeviceToken(token ?? FCMTests.token(n), channel: .fcm),
                owner: UserID(Int64(n)),
                name: "Pixel",
                environment: .production,
                registeredAt: Date(timeIntervalSince1970: 1000),
                channel: .fcm
            ),
            title: "Breathe for a minute",
            badge: 3,
            impulse: try ImpulseID("breathe"),
            expiresAt: expiresIn.map { Date() + $0 }
        )
    }

    func stop() async {
        await transport.shutdown()
        await simulator.stop()
    }
}

@Suite("FCM: service accounts, the token exchange, messages:send and the simulator", .timeLimit(.minutes(3)))
struct FCMTests {
    /// One RSA key for the suite's accounts (generating one takes a while).
    static let sharedKey = Mutex<_RSA.Signing.PrivateKey?>(nil)

    static func key() throws -> _RSA.Signing.PrivateKey {
        try sharedKey.withLock { key in
            if let key { return key }
            let made = try _RSA.Signing.PrivateKey(keySize: .bits2048)
            key = made
            return made
        }
    }

    static func token(_ n: Int) -> String { "dGVzdC1kZXZpY2U:APA91b" + String(repeating: "x", count: 40) + "-\(n)" }

    // MARK: Service accounts and assertions

    @Test("A service account key is read and validated; every fault names its field and never the key")
    func serviceAccount() throws {
        let key = try Self.key()
        let good: [String: Any] = [
            "type": "service_account", "project_id": "acme-wellbeing", "private_key_id": "abc",
            "private_key": key.pemRepresentation, "client_email": "broker@acme-wellbeing.iam.gserviceaccount.com",
            "token_uri": "https://oauth2.googleapis.com/token",
        ]
        func read(_ object: [String: Any]) throws(FCMServiceAccountError) -> FCMServiceAccount {
            try FCMServiceAccount(json: try! JSONSerialization.data(withJSONObject: object))
        }
        let account = try read(good)
        #expect(account.projectID == "acme-wellbeing")
        #expect(account.privateKeyID == "abc")
        #expect(account.fingerprint.count == 64)
        // The file it writes reads back as the same account.
        let again = try FCMServiceAccount(json: account.json())
        #expect(again.fingerprint == account.fingerprint && again.clientEmail == account.clientEmail)
        var withoutURI = good
        withoutURI["token_uri"] = nil
        #expect(try read(withoutURI).tokenURI == FCMServiceAccount.googleTokenURI)

        let faults: [(change: (inout [String: Any]) -> Void, says: String)] = [
            ({ $0["project_id"] = nil }, "project_id"),
            ({ $0["project_id"] = "Acme/../x" }, "project_id"),
            ({ $0["client_email"] = "nobody" }, "client_email"),
            ({ $0["private_key"] = "-----BEGIN PRIVATE KEY-----\nnonsense\n-----END PRIVATE KEY-----" }, "private_key"),
            ({ $0["type"] = "authorized_user" }, "type"),
            ({ $0["token_uri"] = "http://oauth2.googleapis.com/token" }, "token_uri"),
        ]
        for (change, says) in faults {
            var object = good
            change(&object)
            #expect {
                try read(object)
            } throws: { error in
                let description = "\(error)"
                return description.contains(says) && !description.contains("PRIVATE KEY")
            }
        }
        #expect(throws: FCMServiceAccountError.self) { try FCMServiceAccount(json: Data("[1]".utf8)) }
    }

    @Test("An assertion verifies against its own account's key only, and not once altered")
    func assertions() throws {
        let account = FCMServiceAccount(
            projectID: "acme-wellbeing",
            clientEmail: "a@acme.iam",
            privateKeyID: "k",
            key: try Self.key()
        )
        let issued = Date(timeIntervalSince1970: 1_800_000_000)
        let assertion = try account.assertion(issuedAt: issued)
        let claims = try #require(FCMAssertion.verify(assertion, key: account.publicKey))
        #expect(claims.issuer == "a@acme.iam" && claims.scope == FCMServiceAccount.messagingScope)
        #expect(claims.audience == "https://oauth2.googleapis.com/token")
        #expect(claims.expiresAt.timeIntervalSince(claims.issuedAt) == 3600 && claims.issuedAt == issued)
        #expect(FCMAssertion.claimedIssuer(assertion) == "a@acme.iam")
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        #expect(FCMAssertion.verify(assertion, key: other.publicKey) == nil)
        var parts = assertion.split(separator: ".").map(String.init)
        parts[1] = ProviderJWT.base64URL(Data(#"{"iss":"b@acme.iam","scope":"x","aud":"y","iat":1,"exp":2}"#.utf8))
        #expect(FCMAssertion.verify(parts.joined(separator: "."), key: account.publicKey) == nil)
    }

    // MARK: The simulator's checks, pure

    @Test("The token endpoint's checks: grant type, known issuer, signature, scope, audience and lifetime")
    func tokenEndpointValidation() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let account = FCMServiceAccount(
            projectID: "acme-wellbeing",
            clientEmail: "a@acme.iam",
            privateKeyID: nil,
            key: try Self.key()
        )
        let accounts = ["a@acme.iam": FCMSimulatedAccount(projectID: "acme-wellbeing", publicKey: account.publicKey)]
        let validation = FCMValidation(now: now)
        func form(_ assertion: String, grant: String = "urn:ietf:params:oauth:grant-type:jwt-bearer") -> Data {
            var components = URLComponents()
            components.queryItems = [
                URLQueryItem(name: "grant_type", value: grant), URLQueryItem(name: "assertion", value: assertion),
            ]
            return Data((components.percentEncodedQuery ?? "").utf8)
        }
        let good = try account.assertion(issuedAt: now)
        #expect(validation.tokenRequest(form: form(good), accounts: accounts) == .success("a@acme.iam"))
        func refusal(_ body: Data) -> String? {
            if case .failure(let failure) = validation.tokenRequest(form: body, accounts: accounts) {
                return failure.error
            }
            return nil
        }
        #expect(refusal(form(good, grant: "client_credentials")) == "unsupported_grant_type")
        #expect(
            refusal(Data("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer".utf8)) == "invalid_request"
        )
        let stranger = FCMServiceAccount(
            projectID: "x-project",
            clientEmail: "b@acme.iam",
            privateKeyID: nil,
            key: try Self.key()
        )
        #expect(refusal(form(try stranger.assertion(issuedAt: now))) == "invalid_grant")
        let forged = try FCMAssertion.sign(
            .init(
                issuer: "a@acme.iam",
                audience: "https://x/token",
                scope: FCMServiceAccount.messagingScope,
                issuedAt: now,
                expiresAt: now + 60
            ),
            keyID: nil,
            key: try _RSA.Signing.PrivateKey(keySize: .bits2048)
        )
        #expect(refusal(form(forged)) == "invalid_grant")
        let key = try Self.key()
        func signed(
            _ scope: String = FCMServiceAccount.messagingScope,
            aud: String = "https://x/token",
            iat: Date,
            exp: Date
        ) throws -> String {
            try FCMAssertion.sign(
                .init(issuer: "a@acme.iam", audience: aud, scope: scope, issuedAt: iat, expiresAt: exp),
                keyID: nil,
                key: key
            )
        }
        #expect(
            refusal(form(try signed("https://www.googleapis.com/auth/cloud-platform", iat: now, exp: now + 60)))
                == "invalid_scope"
        )
        #expect(refusal(form(try signed(aud: "https://x/other", iat: now, exp: now + 60))) == "invalid_grant")
        #expect(refusal(form(try signed(iat: now - 7200, exp: now - 3600))) == "invalid_grant")
        #expect(refusal(form(try signed(iat: now, exp: now + 7200))) == "invalid_grant")
    }

    @Test(
        "messages:send is checked as FCM does: the credential, the project, the target, the data and the Android fields"
    )
    func messageValidation() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let validation = FCMValidation(now: now)
        let issued = [
            "good": IssuedAccessToken(account: "a", project: "acme-wellbeing", expiresAt: now + 60),
            "old": IssuedAccessToken(account: "a", project: "acme-wellbeing", expiresAt: now - 1),
        ]
        func check(
            _ message: [String: Any],
            path: String = "/v1/projects/acme-wellbeing/messages:send",
            bearer: String = "good",
            state: SimulatedTokenState = .valid
        ) -> FCMRefusal? {
            let body = try! JSONSerialization.data(withJSONObject: ["message": message])
            let result = validation.message(
                method: "POST",
                path: path,
                authorization: "Bearer \(bearer)",
                body: body,
                issued: { issued[$0] },
                tokenState: { _ in state }
            )
            if case .failure(let refusal) = result { return refusal }
            return nil
        }
        let good: [String: Any] = [
            "token": "abc:def", "notification": ["title": "Hi"],
            "android": ["collapse_key": "impulse-1", "ttl": "3600s", "priority": "HIGH"], "data": ["delivery_id": "1"],
        ]
        #expect(check(good) == nil)
        #expect(check(good, bearer: "old")?.status == 401)
        #expect(check(good, bearer: "unknown")?.rpcStatus == "UNAUTHENTICATED")
        #expect(check(good, path: "/v1/projects/globex/messages:send")?.status == 403)
        #expect(check(good, path: "/v1/projects/acme-wellbeing/messages:get")?.status == 404)
        #expect(check(good, state: .unregistered(since: now - 1))?.errorCode == "UNREGISTERED")
        #expect(check(good, state: .otherTopic)?.errorCode == "SENDER_ID_MISMATCH")
        #expect(check(good, state: .otherEnvironment)?.tokenField == true)
        func changed(_ change: (inout [String: Any]) -> Void) -> [String: Any] {
            var message = good
            change(&message)
            return message
        }
        let invalid: [(String, [String: Any])] = [
            ("no target", changed { $0["token"] = nil }),
            ("two targets", changed { $0["topic"] = "news" }),
            ("a token with a space", changed { $0["token"] = "a b" }),
            ("data that is not a string", changed { $0["data"] = ["n": 3] }),
            ("a reserved data key", changed { $0["data"] = ["google.x": "1"] }),
            ("a ttl without unit", changed { $0["android"] = ["ttl": "3600"] }),
            ("a ttl over 28 days", changed { $0["android"] = ["ttl": "2419201s"] }),
            ("an unknown priority", changed { $0["android"] = ["priority": "URGENT"] }),
            ("a title that is a number", changed { $0["notification"] = ["title": 1] }),
            ("a message over 4 KiB", changed { $0["data"] = ["big": String(repeating: "x", count: 5000)] }),
        ]
        for (what, message) in invalid {
            let refusal = check(message)
            #expect(refusal?.status == 400 && refusal?.errorCode == "INVALID_ARGUMENT", "\(what)")
        }
        #expect(check(changed { $0["token"] = "a b" })?.deviceField == "message.token")
        // A Firebase Installation ID instead of a token: taken; one not of an installation id's form, or given beside
        // a token, refused (the first on message.fid).
        let fid = "dIsVQ2QkkLvX3kHQeGk0Dp"
        #expect(FCMMessage.isInstallationID(fid) && !FCMMessage.isInstallationID("abc:def"))
        #expect(!FCMMessage.isInstallationID("aIsVQ2QkkLvX3kHQeGk0Dp") && !FCMMessage.isInstallationID(fid + "x"))
        #expect(
            check(
                changed {
                    $0["token"] = nil
                    $0["fid"] = fid
                }
            ) == nil
        )
        #expect(
            check(
                changed {
                    $0["token"] = nil
                    $0["fid"] = "not-an-installation-id"
                }
            )?.deviceField == "message.fid"
        )
        #expect(check(changed { $0["fid"] = fid })?.status == 400)
        #expect(check(changed { $0["data"] = ["n": 3] })?.tokenField == false)
        #expect(FCMValidation.seconds(ttl: "3.5s") == 3.5 && FCMValidation.seconds(ttl: "-1s") == nil)
    }

    @Test("A message is written as JSON that reads back as FCM's message, whatever its strings hold")
    func messageJSON() throws {
        let title = "Quote \" backslash \\ newline \n tab \t bell \u{07} ümlaut ✓ 🙂"
        let message = FCMMessage(
            project: "acme-wellbeing",
            token: "abc:DEF-123_x.y",
            title: title,
            body: "line\r\nbreak",
            collapseKey: "impulse-7",
            ttl: .seconds(3600),
            data: ["delivery_id": "7", "impulse_id": "a\"b", "unread_count": "2"]
        )
        let root = try #require(try JSONSerialization.jsonObject(with: message.payload) as? [String: Any])
        let body = try #require(root["message"] as? [String: Any])
        #expect(body["token"] as? String == "abc:DEF-123_x.y")
        #expect((body["notification"] as? [String: String]) == ["title": title, "body": "line\r\nbreak"])
        #expect(
            (body["android"] as? [String: String]) == ["collapse_key": "impulse-7", "ttl": "3600s", "priority": "HIGH"]
        )
        #expect((body["data"] as? [String: String]) == ["delivery_id": "7", "impulse_id": "a\"b", "unread_count": "2"])
        // The accepted answer's name, read directly, and through the parser when it is not in the usual shape.
        func name(_ text: String) -> String? { FCMAnswer.messageName(ByteBuffer(string: text).readableBytesView) }
        #expect(name(#"{"name": "projects/p/messages/0:1"}"#) == "projects/p/messages/0:1")
        #expect(name(#"{ "name" :"x" }"#) == "x")
        #expect(name(#"{"name": "with \"escape\""}"#) == nil)
        #expect(name(#"{"other": 1}"#) == nil)
        // An installation id is addressed as `fid`, a registration token as `token`.
        let installation = FCMMessage(
            project: "p",
            token: "dIsVQ2QkkLvX3kHQeGk0Dp",
            title: "t",
            collapseKey: "c",
            ttl: .zero,
            data: [:]
        )
        let addressed = try #require(
            (try JSONSerialization.jsonObject(with: installation.payload) as? [String: Any])?["message"]
                as? [String: Any]
        )
        #expect(addressed["fid"] as? String == "dIsVQ2QkkLvX3kHQeGk0Dp" && addressed["token"] == nil)
        // FCM's refusal of either field is about the device.
        let refused = HTTP2Message(
            headers: [HTTP2Header(":status", "400")],
            body: ByteBuffer(
                string:
                    #"{"error":{"status":"INVALID_ARGUMENT","details":[{"fieldViolations":[{"field":"message.fid"}]}]}}"#
            )
        )
        #expect(FCMAnswer(refused).aboutToken)
    }

    // MARK: Through the simulator, over TLS and HTTP/2

    @Test("Pushes reach the simulator as FCM messages, over one access token and reused connections")
    func sendsMessages() async throws {
        let pair = try await FCMPair.start()
        let pushes = try (1...20).map { try pair.push($0) }
        let heard = Mutex<[Int: String?]>([:])
        let answers = await pair.transport.send(batch: pushes) { index, id in heard.withLock { $0[index] = id } }
        for (index, answer) in answers.enumerated() {
            guard case .accepted(let name) = answer.result else {
                Issue.record("push \(index): \(answer.result)")
                continue
            }
            #expect(name.hasPrefix("projects/\(FCMPair.project)/messages/"))
            #expect(heard.withLock { $0[index] } == .some(name))
        }
        let messages = pair.simulator.fcmAccepted
        #expect(messages.count == 20)
        let first = try #require(messages.first { $0.token == FCMTests.token(1) })
        #expect(first.title == "Breathe for a minute")
        #expect(first.collapseKey == "impulse-1")
        #expect(first.priority == "HIGH")
        let ttl = try #require(first.ttl.flatMap(FCMValidation.seconds(ttl:)))
        #expect((3590...3600).contains(ttl))
        #expect(first.data == ["delivery_id": "1", "impulse_id": "breathe", "unread_count": "3"])
        #expect(pair.simulator.fcmCounts.tokensIssued == 1)
        // More pushes reuse the token and the connections (the pool opens a second while the first carries one
        // stream until FCM accepts a push on it, as with APNs' tokens).
        let client = try #require(pair.transport.allClients.first)
        let opened = await client.counters.connectionsOpened
        #expect((1...2).contains(opened))
        #expect(PushOutcome(await pair.transport.send(try pair.push(21, expiresIn: nil))) == .accepted)
        _ = await pair.transport.send(batch: try (22...60).map { try pair.push($0) }) { _, _ in }
        #expect(pair.simulator.fcmAccepted.count == 60)
        #expect(pair.simulator.fcmAccepted.first { $0.token == FCMTests.token(21) }?.ttl == "0s")
        // A device registered by its Firebase Installation ID is pushed as `fid`.
        #expect(PushOutcome(await pair.transport.send(try pair.push(61, token: "eTbXGQ5oq9k2Bv8cZm1yWq"))) == .accepted)
        let installation = pair.simulator.fcmAccepted.first { $0.token == "eTbXGQ5oq9k2Bv8cZm1yWq" }
        #expect(installation?.fid == true && pair.simulator.fcmAccepted.filter(\.fid).count == 1)
        #expect(pair.simulator.fcmCounts.tokensIssued == 1)
        #expect(await client.counters.connectionsOpened == opened)
        await pair.stop()
    }

    @Test(
        "FCM's verdicts: UNREGISTERED is a gone device from the answer's time, a bad token is invalid, quota has a floor"
    )
    func verdicts() async throws {
        let pair = try await FCMPair.start()
        pair.simulator.setToken(FCMTests.token(1), .unregistered(since: Date(timeIntervalSince1970: 0)))
        pair.simulator.setToken(FCMTests.token(2), .otherEnvironment)
        // A token differing only in case is another device: FCM tokens are case-sensitive.
        pair.simulator.setToken(FCMTests.token(3).uppercased(), .unregistered(since: Date(timeIntervalSince1970: 0)))
        let before = Date()
        let answers = await pair.transport.send(batch: try (1...3).map { try pair.push($0) }) { _, _ in }
        guard case .deviceGone(let evidence?) = PushOutcome(answers[0].result) else {
            Issue.record("\(answers[0].result)")
            return
        }
        #expect(evidence >= before)
        #expect(PushOutcome(answers[1].result) == .deviceInvalid)
        #expect(PushOutcome(answers[2].result) == .accepted)
        var faults = SimulatorFaults()
        faults.quotaExceededNext = 1
        faults.retryAfterSeconds = 7
        pair.simulator.setFaults(faults)
        let quota = await pair.transport.send(try pair.push(4))
        #expect(quota.refusal?.reason == "QUOTA_EXCEEDED")
        #expect(PushOutcome(quota) == .retry(newConnection: false, floor: .seconds(7)))
        // The pool is held for the pause FCM asked for (nothing goes out over it before the pause ends).
        #expect(await pair.transport.allClients.first?.pausedUntil != nil)
        await pair.stop()
    }

    @Test(
        "A refused access token is an expired credential, renewed once; a refused account stops the tenant's FCM pushes until it is replaced"
    )
    func credentials() async throws {
        let pair = try await FCMPair.start()
        #expect(PushOutcome(await pair.transport.send(try pair.push(1))) == .accepted)
        // The simulator forgets the token it issued (as after a revocation): 401, answered as an expired
        // credential (the gateway's resend loop renews it and sends again); the renewal fetches one token.
        pair.simulator.revokeFCMAccessTokens()
        let expired = await pair.transport.send(try pair.push(2))
        #expect(PushOutcome(expired) == .credentialExpired)
        #expect(PushOutcomePolicy().action(for: expired, attempt: 1) == .renewProviderTokenAndRetry)
        await pair.transport.renewCredentials(tenant: FCMPair.tenant, channel: .fcm)
        #expect(PushOutcome(await pair.transport.send(try pair.push(2))) == .accepted)
        #expect(pair.simulator.fcmCounts.tokensIssued == 2)
        // The renewal proved itself: a later revocation is a new expiry, not the account's refusal.
        pair.simulator.revokeFCMAccessTokens()
        #expect(PushOutcome(await pair.transport.send(try pair.push(2))) == .credentialExpired)
        await pair.transport.renewCredentials(tenant: FCMPair.tenant, channel: .fcm)
        // Refused again before any push went through with the renewal: the account is refused.
        pair.simulator.revokeFCMAccessTokens()
        let second = await pair.transport.send(try pair.push(2))
        #expect(PushOutcome(second) == .credentialRefused(reason: "UNAUTHENTICATED"), "\(second)")
        #expect(pair.transport.failure(tenant: FCMPair.tenant) == "UNAUTHENTICATED")
        #expect(pair.simulator.fcmCounts.tokensIssued == 3)
        pair.transport.setAccount(pair.account, tenant: FCMPair.tenant)
        // The device belongs to another sender: the credential's failure, never the device's.
        pair.simulator.setToken(FCMTests.token(3), .otherTopic)
        let mismatch = await pair.transport.send(try pair.push(3))
        #expect(PushOutcome(mismatch) == .credentialRefused(reason: "SENDER_ID_MISMATCH"))
        #expect(pair.transport.failure(tenant: FCMPair.tenant) == "SENDER_ID_MISMATCH")
        let sent = pair.simulator.fcmCounts
        let refused = await pair.transport.send(try pair.push(4))
        #expect(refused.refusal?.reason.hasPrefix(FCMPushTransport.credentialFailed) == true)
        #expect(PushOutcomePolicy().action(for: refused, attempt: 1) == .drop(alert: false))
        #expect(
            pair.simulator.fcmCounts.accepted == sent.accepted && pair.simulator.fcmCounts.rejected == sent.rejected
        )
        // A replaced account is used at once.
        pair.transport.setAccount(pair.account, tenant: FCMPair.tenant)
        #expect(PushOutcome(await pair.transport.send(try pair.push(5))) == .accepted)
        // A tenant without an account: refused here, nothing sent.
        var other = try pair.push(6)
        other.tenant = try TenantID("globex")
        #expect(await pair.transport.send(other).refusal?.reason == FCMPushTransport.noCredential)
        await pair.stop()
    }

    @Test("A stalled or dropped FCM answer fails the push within its deadline; the transport goes on")
    func stallAndDrop() async throws {
        let pair = try await FCMPair.start(deadline: .seconds(3), unreachableWait: .seconds(3))
        #expect(PushOutcome(await pair.transport.send(try pair.push(1))) == .accepted)
        var faults = SimulatorFaults()
        faults.hangNext = 1
        pair.simulator.setFaults(faults)
        let stalled = await pair.transport.send(try pair.push(2))
        guard case .transportFailure = stalled else {
            Issue.record("\(stalled)")
            return
        }
        faults.hangNext = 0
        faults.dropNext = 1
        pair.simulator.setFaults(faults)
        let dropped = await pair.transport.send(try pair.push(3))
        guard case .transportFailure = dropped else {
            Issue.record("\(dropped)")
            return
        }
        #expect(PushOutcome(await pair.transport.send(try pair.push(4))) == .accepted)
        await pair.stop()
    }

    @Test(
        "The token exchange: a stalled endpoint fails within its deadline, failures back off, tokens are refreshed before they expire"
    )
    func tokenExchange() async throws {
        let pair = try await FCMPair.start()
        let clock = ManualClock()
        let tokens = FCMAccessTokens(
            account: pair.account,
            tls: pair.endpoint.tls,
            serverHostname: "localhost",
            // Long enough for a TLS handshake on a machine the whole suite loads: the stall is what must end it.
            deadline: .seconds(5),
            // A caller that does not wait for the next attempt: each failure answers it.
            patience: .zero,
            clock: clock,
            logger: TestBroker.logger
        )
        var faults = SimulatorFaults()
        faults.hangNext = 1
        pair.simulator.setFaults(faults)
        await #expect(throws: (any Error).self) { try await tokens.token() }
        // Within the backoff the endpoint is not asked again: the last error answers.
        faults.hangNext = 0
        faults.tokenFailNext = 1
        pair.simulator.setFaults(faults)
        await #expect(throws: (any Error).self) { try await tokens.token() }
        #expect(await tokens.exchanges == 1)
        // After it (at most 0.75 s), the endpoint is asked: its failure doubles the backoff (at most 1.5 s).
        clock.advance(by: .milliseconds(750))
        await #expect {
            try await tokens.token()
        } throws: { error in
            "\(error)".contains("500 internal_failure")
        }
        #expect(await tokens.exchanges == 2)
        clock.advance(by: .milliseconds(1500))
        let first = try await tokens.token()
        #expect(await tokens.exchanges == 3 && pair.simulator.fcmCounts.tokensIssued == 1)
        // Cached for 80% of its hour, then refreshed before it expires.
        clock.advance(by: .seconds(47 * 60))
        #expect(try await tokens.token() == first)
        clock.advance(by: .seconds(2 * 60))
        let second = try await tokens.token()
        #expect(second != first && pair.simulator.fcmCounts.tokensIssued == 2)
        // A refused token is forgotten: the next call fetches another.
        await tokens.invalidate(second)
        #expect(try await tokens.token() != second)
        #expect(pair.simulator.fcmCounts.tokensIssued == 3)
        await pair.stop()
    }

    @Test(
        "While the token endpoint fails, a push waits for its next attempt (at most 12 s apart) and goes out once it is back"
    )
    func tokenEndpointOutage() async throws {
        let pair = try await FCMPair.start()
        let clock = ManualClock()
        let tokens = FCMAccessTokens(
            account: pair.account,
            tls: pair.endpoint.tls,
            serverHostname: "localhost",
            deadline: .seconds(5),
            clock: clock,
            logger: TestBroker.logger
        )
        // Eight failed exchanges: the pauses double from 0.5 s to their 8 s ceiling (jittered by up to half).
        var faults = SimulatorFaults()
        faults.tokenFailNext = 8
        pair.simulator.setFaults(faults)
        let waiting = Task { try await tokens.token() }
        var pauses: [Duration] = []
        while pauses.count < 8 {
            #expect(try await eventually { clock.sleepers == 1 && clock.requested.count == pauses.count + 1 })
            let pause = try #require(clock.requested.last)
            pauses.append(pause)
            clock.advance(by: pause)
        }
        // The endpoint is back: the waiting caller gets a token at the next attempt, with no error on the way.
        let token = try await waiting.value
        #expect(!token.isEmpty && pair.simulator.fcmCounts.tokensIssued == 1)
        #expect(await tokens.exchanges == 9)
        for (index, pause) in pauses.enumerated() {
            let base = min(0.5 * Double(1 << index), 8)
            #expect(
                pause.seconds >= base * 0.5 - 0.001 && pause.seconds <= base * 1.5 + 0.001,
                "pause \(index): \(pause)"
            )
        }
        #expect(pauses.allSatisfy { $0 <= .seconds(12) })

        // Out of patience: a caller fails with the endpoint's error instead of waiting on.
        let impatient = FCMAccessTokens(
            account: pair.account,
            tls: pair.endpoint.tls,
            serverHostname: "localhost",
            deadline: .seconds(5),
            patience: .seconds(2),
            clock: clock,
            logger: TestBroker.logger
        )
        faults.tokenFailNext = 100
        pair.simulator.setFaults(faults)
        let ended = Mutex(false)
        let failing = Task {
            defer { ended.withLock { $0 = true } }
            return try await impatient.token()
        }
        // A few pauses at most (their sum stays within the 2 s), then the error.
        for _ in 0..<10 {
            #expect(try await eventually { clock.sleepers == 1 || ended.withLock { $0 } })
            if ended.withLock({ $0 }) { break }
            clock.advance(by: try #require(clock.requested.last))
        }
        await #expect(throws: (any Error).self) { try await failing.value }
        await pair.stop()
    }
}
