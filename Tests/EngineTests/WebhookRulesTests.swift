import Foundation
import Testing

@testable import Engine

/// The webhooks' pure rules: signatures, retries, where an endpoint may point, the event body.
@Suite("Webhook rules")
struct WebhookRulesTests {
    @Test("A signature covers timestamp and body, verifies with each signing secret, and expires")
    func signatures() {
        let now = Date(timeIntervalSince1970: 1_764_000_000)
        let header = WebhookSignature.sign(body: "{}", timestamp: 1_764_000_000, secrets: ["new", "old"])
        #expect(header.hasPrefix("t=1764000000,v1=") && header.components(separatedBy: "v1=").count == 3)
        #expect(WebhookSignature.verify(header: header, body: "{}", secret: "new", now: now))
        #expect(WebhookSignature.verify(header: header, body: "{}", secret: "old", now: now))
        #expect(!WebhookSignature.verify(header: header, body: "{ }", secret: "new", now: now))
        #expect(!WebhookSignature.verify(header: header, body: "{}", secret: "other", now: now))
        #expect(!WebhookSignature.verify(header: header, body: "{}", secret: "new", now: now.addingTimeInterval(301)))
        // Known answer: HMAC-SHA256 of "1.body" under "key" (Python's hmac module agrees).
        #expect(
            WebhookSignature.hmac(body: "body", timestamp: 1, secret: "key")
                == "91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"
        )
        #expect(WebhookSignature.newSecret() != WebhookSignature.newSecret())
    }

    @Test("The previous secret signs beside the new one until it expires")
    func rotation() {
        let now = Date()
        var endpoint = WebhookEndpoint(
            id: "wh",
            tenant: TenantID(trusted: "acme"),
            url: "https://x",
            events: [.userCreated],
            secret: "new",
            createdAt: now
        )
        #expect(endpoint.signingSecrets(at: now) == ["new"])
        endpoint.previousSecret = "old"
        endpoint.previousSecretExpiresAt = now.addingTimeInterval(60)
        #expect(endpoint.signingSecrets(at: now) == ["new", "old"])
        #expect(endpoint.signingSecrets(at: now.addingTimeInterval(61)) == ["new"])
    }

    @Test("Retries double to the maximum, spread by a fifth, and stop at the end of the window")
    func retries() {
        let policy = WebhookRetryPolicy(initial: .seconds(10), maximum: .seconds(3600), window: .seconds(86_400))
        let created = Date(timeIntervalSince1970: 0)
        func next(_ attempts: Int, at now: Date, jitter: Double = 0) -> WebhookAttemptResult {
            policy.afterFailure(
                attempts: attempts,
                createdAt: created,
                now: now,
                status: 500,
                error: "e",
                jitter: jitter
            )
        }
        #expect(next(1, at: created) == .retry(next: Date(timeIntervalSince1970: 10), status: 500, error: "e"))
        #expect(next(3, at: created) == .retry(next: Date(timeIntervalSince1970: 40), status: 500, error: "e"))
        #expect(
            next(3, at: created, jitter: 1) == .retry(next: Date(timeIntervalSince1970: 48), status: 500, error: "e")
        )
        #expect(next(30, at: created) == .retry(next: Date(timeIntervalSince1970: 3600), status: 500, error: "e"))
        #expect(next(30, at: Date(timeIntervalSince1970: 84_000)) == .dropped(status: 500, error: "e"))
    }

    @Test("Endpoints are https, without credentials, and (by default) not this machine or a private network")
    func targets() throws {
        let strict = WebhookTargetPolicy()
        #expect(
            try strict.validate(url: "https://hooks.example.com/impulse?k=1") == "https://hooks.example.com/impulse?k=1"
        )
        for url in [
            "http://hooks.example.com/", "https://user:pw@hooks.example.com/", "ftp://x", "hooks.example.com",
            "https://localhost/", "https://127.0.0.1/", "https://10.0.0.8/", "https://192.168.1.1/",
            "https://172.20.0.1/", "https://169.254.169.254/latest/meta-data", "https://[::1]/", "https://[fd00::1]/",
            "https://printer.local/", "https://metadata.google.internal/",
        ] {
            #expect(throws: EngineError.self, "\(url)") { try strict.validate(url: url) }
        }
        #expect(try WebhookTargetPolicy(allowPrivateAddresses: true).validate(url: "https://127.0.0.1:9/") != "")
        #expect(try WebhookTargetPolicy.events(["user.created", "user.created"]) == [.userCreated])
        #expect(throws: EngineError.self) { try WebhookTargetPolicy.events([]) }
        #expect(throws: EngineError.self) { try WebhookTargetPolicy.events(["user.renamed"]) }
    }

    @Test("Every spelling of an internal address is refused at registration: the resolver's forms, not strings")
    func internalSpellings() throws {
        let strict = WebhookTargetPolicy()
        // What a campaign registered (201) and then reached 127.0.0.1 with, and more of the same kind.
        for host in [
            "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0", "0x7f.1", "017700000001", "localhost.",
            "LOCALHOST", "[0:0:0:0:0:0:0:1]", "[0000:0000:0000:0000:0000:0000:0000:0001]", "[fe90::1]", "[fec0::1]",
            "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]", "[64:ff9b::a00:1]", "[2002:c0a8:101::1]",
            "[ff02::1]", "[::]", "100.64.0.1", "198.18.0.1", "192.0.2.1", "224.0.0.1", "255.255.255.255",
            "169.254.169.254.", "intranet", "db", "router.lan", "nas.home.arpa", "a.localdomain",
        ] {
            #expect(throws: EngineError.self, "\(host)") { try strict.validate(url: "https://\(host)/hook") }
        }
        for host in ["hooks.example.com", "8.8.8.8", "[2606:4700::1111]", "[::ffff:8.8.8.8]", "1e100.net"] {
            #expect(try strict.validate(url: "https://\(host)/hook") != "", "\(host)")
        }
    }

    @Test("Address literals read as the resolver reads them, and classified by IANA's special-purpose ranges")
    func addresses() throws {
        #expect(NetworkAddress(literal: "2130706433")?.description == "127.0.0.1")
        #expect(NetworkAddress(literal: "0x7f000001")?.description == "127.0.0.1")
        #expect(NetworkAddress(literal: "0177.0.0.1")?.description == "127.0.0.1")
        #expect(NetworkAddress(literal: "127.1")?.description == "127.0.0.1")
        #expect(NetworkAddress(literal: "10.1.258")?.description == "10.1.1.2")  // the last part fills two bytes
        #expect(NetworkAddress(literal: "10.256.1") == nil)  // a middle part over 255
        #expect(NetworkAddress(literal: "10.1.2.258") == nil)
        #expect(NetworkAddress(literal: "hooks.example.com") == nil)
        #expect(
            NetworkAddress(literal: "::ffff:10.0.0.1")?.bytes == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 10, 0, 0, 1]
        )
        #expect(NetworkAddress(literal: "1:2:3:4:5:6:7:8")?.description == "1:2:3:4:5:6:7:8")
        #expect(NetworkAddress(literal: "1::8")?.description == "1:0:0:0:0:0:0:8")
        #expect(NetworkAddress(literal: "1:2:3:4:5:6:7:8:9") == nil)
        #expect(NetworkAddress(literal: "fe80::1%eth0") == nil)
        for text in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            #expect(NetworkAddress(literal: text)?.isPublic == true, "\(text)")
        }
        for text in [
            "127.0.0.1", "10.0.0.1", "172.31.255.255", "192.168.0.1", "169.254.0.1", "100.127.0.1", "0.0.0.0",
            "::1", "::", "::ffff:127.0.0.1", "::10.0.0.1", "fc00::1", "fdff::1", "fe80::1", "febf::1", "fec0::1",
            "ff00::1", "2001:db8::1", "2001::1", "64:ff9b:1::1", "64:ff9b::7f00:1", "2002:7f00:1::1", "100::1",
        ] {
            #expect(NetworkAddress(literal: text)?.isPublic == false, "\(text)")
        }
    }

    @Test("An event's body is the same bytes at every attempt, with its data as JSON")
    func body() {
        let record = WebhookEventRecord(
            tenant: TenantID(trusted: "acme"),
            event: .deliveryRead,
            orderingKey: "user:1",
            data: ["user": "a\"b", "impulseID": "x", "apnsID": nil],
            at: Date(timeIntervalSince1970: 0)
        )
        #expect(record.data == #"{"impulseID":"x","user":"a\"b"}"#)
        let item = WebhookOutboxItem(
            id: 7,
            tenant: record.tenant,
            endpoint: "wh",
            event: record.event,
            orderingKey: record.orderingKey,
            data: record.data,
            createdAt: record.at,
            attempts: 0
        )
        #expect(
            item.body
                == #"{"createdAt":"1970-01-01T00:00:00.000Z","data":{"impulseID":"x","user":"a\"b"},"id":"evt_7","tenant":"acme","type":"delivery.read"}"#
        )
        #expect((try? JSONSerialization.jsonObject(with: Data(item.body.utf8))) != nil)
    }
}
