import Crypto
import Foundation

/// What a tenant's webhook endpoint can be told about.
public enum WebhookEvent: String, CaseIterable, Sendable, Codable, Comparable {
    case deliveryPushed = "delivery.pushed"
    case deliveryFailed = "delivery.failed"
    case deliveryRead = "delivery.read"
    case deviceRemoved = "device.removed"
    case userCreated = "user.created"
    case userDeleted = "user.deleted"

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Events as stored and shown: sorted, comma-separated.
    public static func list(_ events: Set<WebhookEvent>) -> String {
        events.sorted().map(\.rawValue).joined(separator: ",")
    }

    public static func parse(list: String) -> Set<WebhookEvent> {
        Set(list.split(separator: ",").compactMap { WebhookEvent(rawValue: String($0)) })
    }
}

/// A tenant's registered HTTPS endpoint: where events go, which ones, the secrets that sign them, and how it fares.
public struct WebhookEndpoint: Sendable, Equatable {
    public var id: String
    public var tenant: TenantID
    public var url: String
    public var events: Set<WebhookEvent>
    /// Signs every event; shown once, when created or rotated.
    public var secret: String
    /// The secret before the last rotation: events are signed with it too until `previousSecretExpiresAt`, so a
    /// receiver can switch without losing any.
    public var previousSecret: String?
    public var previousSecretExpiresAt: Date?
    public var enabled: Bool
    public var createdAt: Date
    /// Events the endpoint answered 2xx.
    public var delivered: Int
    /// Events given up: retried for a day without success, or not queued because the tenant's queue was full.
    public var dropped: Int
    public var lastAttemptAt: Date?
    public var lastStatus: Int?
    public var lastError: String?

    public init(
        id: String,
        tenant: TenantID,
        url: String,
        events: Set<WebhookEvent>,
        secret: String,
        enabled: Bool = true,
        createdAt: Date
    ) {
        self.id = id
        self.tenant = tenant
        self.url = url
        self.events = events
        self.secret = secret
        self.enabled = enabled
        self.createdAt = createdAt
        delivered = 0
        dropped = 0
    }

    /// The secrets that sign an event sent at `now`: the current one, and the previous one while it is still valid.
    public func signingSecrets(at now: Date) -> [String] {
        guard let previousSecret, let until = previousSecretExpiresAt, now < until else { return [secret] }
        return [secret, previousSecret]
    }
}

/// What an admin sends to register or change an endpoint.
public struct WebhookSettings: Sendable, Equatable {
    public var url: String?
    public var events: [String]?
    public var enabled: Bool?

    public init(url: String? = nil, events: [String]? = nil, enabled: Bool? = nil) {
        self.url = url
        self.events = events
        self.enabled = enabled
    }
}

/// Where a tenant's endpoint may point: HTTPS only, and (unless the operator allows it, for a receiver inside the
/// network) not at this machine or a private network, so an admin cannot make the broker call internal services.
public struct WebhookTargetPolicy: Sendable, Equatable {
    public var allowPrivateAddresses: Bool
    /// Endpoints per tenant.
    public var maximumEndpoints: Int

    public init(allowPrivateAddresses: Bool = false, maximumEndpoints: Int = 10) {
        self.allowPrivateAddresses = allowPrivateAddresses
        self.maximumEndpoints = maximumEndpoints
    }

    public func validate(url text: String) throws(EngineError) -> String {
        guard text.count <= 2048, let url = URL(string: text), url.scheme?.lowercased() == "https",
            let host = url.host?.lowercased(), !host.isEmpty, url.user == nil, url.password == nil,
            url.fragment == nil
        else {
            throw EngineError(.invalidInput, "url must be an https:// URL without credentials or a fragment")
        }
        if !allowPrivateAddresses && Self.isInternal(host) {
            throw EngineError(.invalidInput, "url must not name this machine or a private network")
        }
        return text
    }

    public static func events(_ names: [String]) throws(EngineError) -> Set<WebhookEvent> {
        var events = Set<WebhookEvent>()
        for name in names {
            guard let event = WebhookEvent(rawValue: name) else {
                let known = WebhookEvent.allCases.map(\.rawValue).joined(separator: ", ")
                throw EngineError(.invalidInput, "unknown event \(name.prefix(64)); events are \(known)")
            }
            events.insert(event)
        }
        guard !events.isEmpty else { throw EngineError(.invalidInput, "events must name at least one event") }
        return events
    }

    /// A host that is, or names, this machine or a network that is not the public internet: an address literal in
    /// any form the resolver takes (``NetworkAddress``), a name under a local-only domain, or a name of one label
    /// (a resolver's search domains complete it to a local host). Where a public name resolves to is checked at
    /// each attempt (`WebhookDispatcher`).
    static func isInternal(_ host: String) -> Bool {
        var name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        // `localhost.` is `localhost`: a fully qualified name's final dot changes nothing.
        while name.hasSuffix(".") { name.removeLast() }
        if name.isEmpty { return true }
        if let address = NetworkAddress(literal: name) { return !address.isPublic }
        if name.contains(":") || name.contains("%") { return true }
        let localDomains = ["localhost", "local", "internal", "localdomain", "home.arpa", "lan", "intranet", "corp"]
        if localDomains.contains(where: { name == $0 || name.hasSuffix("." + $0) }) { return true }
        if name == "ip6-localhost" || name == "ip6-loopback" { return true }
        return !name.contains(".")
    }
}

/// An event to queue for a tenant's subscribed endpoints, written in the transaction of the change it tells of.
public struct WebhookEventRecord: Sendable, Equatable {
    public var tenant: TenantID
    public var event: WebhookEvent
    /// Events of one key (a user) reach an endpoint in the order they were queued.
    public var orderingKey: String
    /// The event's `data` object, JSON.
    public var data: String
    public var at: Date

    public init(tenant: TenantID, event: WebhookEvent, orderingKey: String, data: [String: String?], at: Date) {
        self.tenant = tenant
        self.event = event
        self.orderingKey = orderingKey
        self.at = at
        var object: [String: String] = [:]
        for (key, value) in data { if let value { object[key] = value } }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.data = (try? encoder.encode(object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// A queued event for one endpoint, as the dispatcher takes it.
public struct WebhookOutboxItem: Sendable, Equatable {
    public var id: Int64
    public var tenant: TenantID
    public var endpoint: String
    public var event: WebhookEvent
    public var orderingKey: String
    public var data: String
    public var createdAt: Date
    /// Attempts made before this one.
    public var attempts: Int

    public init(
        id: Int64,
        tenant: TenantID,
        endpoint: String,
        event: WebhookEvent,
        orderingKey: String,
        data: String,
        createdAt: Date,
        attempts: Int
    ) {
        self.id = id
        self.tenant = tenant
        self.endpoint = endpoint
        self.event = event
        self.orderingKey = orderingKey
        self.data = data
        self.createdAt = createdAt
        self.attempts = attempts
    }

    /// The body sent: the same bytes at every attempt.
    public var body: String {
        let created = ISO8601DateFormatter.string(
            from: createdAt,
            timeZone: TimeZone(secondsFromGMT: 0)!,
            formatOptions: [.withInternetDateTime, .withFractionalSeconds]
        )
        return
            #"{"createdAt":"\#(created)","data":\#(data),"id":"evt_\#(id)","tenant":"\#(tenant.rawValue)","type":"\#(event.rawValue)"}"#
    }
}

/// The outcome of one attempt, as the store records it.
public enum WebhookAttemptResult: Sendable, Equatable {
    /// The endpoint answered 2xx: the event leaves the queue.
    case delivered(status: Int)
    /// Tried again at `next`.
    case retry(next: Date, status: Int?, error: String)
    /// Given up (a day of failures): the event leaves the queue and the endpoint's dropped count grows.
    case dropped(status: Int?, error: String)
}

/// When a failed event is tried again: doubling from `initial` to `maximum`, spread by up to a fifth, for
/// `window` after it was queued; then it is dropped.
public struct WebhookRetryPolicy: Sendable, Equatable {
    public var initial: Duration
    public var maximum: Duration
    public var window: Duration

    public init(
        initial: Duration = .seconds(10),
        maximum: Duration = .seconds(3600),
        window: Duration = .seconds(86_400)
    ) {
        self.initial = initial
        self.maximum = maximum
        self.window = window
    }

    /// The outcome of a failed attempt (the `attempts`-th, counting from 1); `jitter` in 0...1.
    public func afterFailure(
        attempts: Int,
        createdAt: Date,
        now: Date,
        status: Int?,
        error: String,
        jitter: Double
    ) -> WebhookAttemptResult {
        let base = min(initial.seconds * pow(2, Double(max(0, attempts - 1))), maximum.seconds)
        let next = now.addingTimeInterval(base * (1 + 0.2 * min(max(jitter, 0), 1)))
        guard next < createdAt.addingTimeInterval(window.seconds) else {
            return .dropped(status: status, error: error)
        }
        return .retry(next: next, status: status, error: error)
    }
}

/// The signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, one `v1` per signing secret.
public enum WebhookSignature {
    public static let header = "Impulse-Signature"

    public static func sign(body: String, timestamp: Int, secrets: [String]) -> String {
        (["t=\(timestamp)"] + secrets.map { "v1=" + hmac(body: body, timestamp: timestamp, secret: $0) })
            .joined(separator: ",")
    }

    public static func hmac(body: String, timestamp: Int, secret: String) -> String {
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("\(timestamp).\(body)".utf8),
            using: SymmetricKey(data: Data(secret.utf8))
        )
        return mac.map { String(format: "%02x", $0) }.joined()
    }

    /// Whether a header signs `body` with `secret` within `tolerance` of `now` (what a receiver checks).
    public static func verify(header: String, body: String, secret: String, now: Date, tolerance: Double = 300) -> Bool
    {
        var timestamp: Int?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int(pair[1]) } else if pair[0] == "v1" { signatures.append(pair[1]) }
        }
        guard let timestamp, abs(now.timeIntervalSince1970 - Double(timestamp)) <= tolerance else { return false }
        let expected = hmac(body: body, timestamp: timestamp, secret: secret)
        return signatures.contains { Data($0.utf8) == Data(expected.utf8) }
    }

    /// A new secret: 32 random bytes, base64url, prefixed so it is recognisable in a receiver's configuration.
    public static func newSecret() -> String { randomToken(prefix: "whsec_") }
}

/// The tenant's endpoints and their queue: the webhooks' port. Events are queued by the stores themselves, in the
/// transactions that make the changes (see ``WebhookEventRecord``).
public protocol WebhookStore: Sendable {
    func webhookEndpoints(tenant: TenantID) async throws -> [WebhookEndpoint]
    func createWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws
    /// Replaces the endpoint's settings and secrets (not its counters); false when it does not exist.
    func updateWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws -> Bool
    /// Deletes the endpoint with its queued events and attempts; false when it does not exist.
    func deleteWebhookEndpoint(tenant: TenantID, id: String, audit: AuditEntry) async throws -> Bool
    /// How many events wait for the tenant's endpoints, by endpoint.
    func pendingWebhookEvents(tenant: TenantID) async throws -> [String: Int]
    /// The endpoint's latest attempts, newest first.
    func webhookAttempts(tenant: TenantID, endpoint: String, limit: Int) async throws -> [WebhookAttempt]
    /// Events due at `now`, at most `room.free`: for each endpoint and ordering key only the oldest (so a key's
    /// events go in order), only of enabled endpoints not in `room.fullEndpoints`, and for each tenant at most its
    /// room (the oldest due of each tenant first, so a tenant's backlog cannot crowd out another's). Leased to the
    /// caller for `lease`: another node, or the caller's next look, leaves them out.
    func dueWebhookEvents(now: Date, room: WebhookShares.Room, lease: Duration) async throws -> [WebhookOutboxItem]
    /// Records an attempt's outcome: the event leaves the queue (delivered, dropped) or waits for its next try.
    func recordWebhookAttempt(
        _ item: WebhookOutboxItem,
        result: WebhookAttemptResult,
        at: Date,
        duration: Double
    )
        async throws
}

/// One attempt to deliver an event, as the console shows them.
public struct WebhookAttempt: Sendable, Equatable {
    public var eventID: Int64
    public var event: WebhookEvent
    public var at: Date
    public var status: Int?
    public var error: String?
    public var outcome: String
    public var durationSeconds: Double

    public init(
        eventID: Int64,
        event: WebhookEvent,
        at: Date,
        status: Int?,
        error: String?,
        outcome: String,
        durationSeconds: Double
    ) {
        self.eventID = eventID
        self.event = event
        self.at = at
        self.status = status
        self.error = error
        self.outcome = outcome
        self.durationSeconds = durationSeconds
    }
}

extension WebhookEventRecord {
    /// Events about users and devices: one shape for both stores.
    public static func user(_ event: WebhookEvent, tenant: TenantID, user: UserID, username: String, at: Date) -> Self {
        WebhookEventRecord(
            tenant: tenant,
            event: event,
            orderingKey: "user:\(user.rawValue)",
            data: ["user": username],
            at: at
        )
    }

    /// A device removed: `reason` is `unregistered` (the app or an admin), `apns` or `fcm` (the service called its
    /// token dead).
    public static func deviceRemoved(
        tenant: TenantID,
        user: UserID,
        username: String?,
        token: String,
        reason: String,
        at: Date
    ) -> Self {
        WebhookEventRecord(
            tenant: tenant,
            event: .deviceRemoved,
            orderingKey: "user:\(user.rawValue)",
            data: ["user": username, "token": token, "reason": reason],
            at: at
        )
    }
}
