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
