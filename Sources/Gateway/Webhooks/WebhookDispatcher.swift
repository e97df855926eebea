import AsyncHTTPClient
import Engine
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import ServiceLifecycle
import Synchronization

/// How webhook events are sent.
public struct WebhookConfiguration: Sendable {
    /// Where endpoints may point, and how many a tenant may have.
    public var policy: WebhookTargetPolicy
    /// PEM certificates trusted besides the system's (a receiver behind a private CA).
    public var trustRootsFile: String?
    /// One attempt's deadline: connecting, sending and the answer's head.
    public var timeout: Duration
    /// Attempts in flight at once, over all endpoints, and per endpoint: a slow endpoint holds only its own.
    public var concurrency: Int
    public var perEndpoint: Int
    /// Attempts in flight for one tenant's endpoints together: its dead endpoints never hold every slot.
    public var perTenant: Int
    public var retry: WebhookRetryPolicy
    /// How often the queue is looked at while it is idle.
    public var pollInterval: Duration
    /// Resolves an endpoint's host name for each attempt (the system's resolver; tests name their own).
    public var resolve: @Sendable (String) async throws -> [NetworkAddress] = WebhookConnector.systemResolve

    public init(
        policy: WebhookTargetPolicy = WebhookTargetPolicy(),
        trustRootsFile: String? = nil,
        timeout: Duration = .seconds(10),
        concurrency: Int = 32,
        perEndpoint: Int = 4,
        perTenant: Int = 8,
        retry: WebhookRetryPolicy = WebhookRetryPolicy(),
        pollInterval: Duration = .milliseconds(500)
    ) {
        self.policy = policy
        self.trustRootsFile = trustRootsFile
        self.timeout = timeout
        self.concurrency = concurrency
        self.perEndpoint = perEndpoint
        self.perTenant = perTenant
        self.retry = retry
        self.pollInterval = pollInterval
    }
}

/// Sends the webhook outbox's events to their endpoints, apart from everything else the broker does: a slow or
/// dead endpoint costs its own attempts (bounded per endpoint) and never a push. Each event is signed with its
/// endpoint's secrets, retried with backoff for a day (``WebhookRetryPolicy``), then dropped and counted. A user's
/// events reach an endpoint in order: the store hands out only the oldest of each (endpoint, user) line, leased
/// until its attempt is recorded.
final class WebhookDispatcher: Service, Sendable {
    let store: any WebhookStore
    let configuration: WebhookConfiguration
    let connector: WebhookConnector
    let logger: Logger
    /// Attempts in flight, by endpoint and by tenant.
    private let inFlight = Mutex<(endpoints: [String: Int], tenants: [TenantID: Int])>(([:], [:]))
    let shares: WebhookShares
    /// How long an attempt may take at most: the name lookup, then the request (a second past the connect and read
    /// timeouts), then as long again as the lookup for writing its outcome. An event is leased for that long, so
    /// no other round (or node) sends it while its attempt may still be running.
    let lease: Duration

    init(store: any WebhookStore, configuration: WebhookConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.shares = WebhookShares(
            concurrency: configuration.concurrency,
            perEndpoint: configuration.perEndpoint,
            perTenant: configuration.perTenant
        )
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = configuration.trustRootsFile {
            tls.additionalTrustRoots = [.file(file)]
        }
        var client = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .seconds(Int64(configuration.timeout.components.seconds)),
                read: .seconds(Int64(configuration.timeout.components.seconds))
            )
        )
        // HTTP/1.1 with keep-alive: a few requests at a time per endpoint need no multiplexing, and
        // AsyncHTTPClient 1.37.0's HTTP/2 pool mishandles a SETTINGS frame reaching an idle connection (it arms a
        // second idle timer; an assertion in debug builds, which crashed our test run's own client).
        client.httpVersion = .http1Only
        client.connectionPool = .init(idleTimeout: .seconds(60))
        // A resolver may be slow to answer on a loaded machine; an attempt's own timeout starts after it.
        let resolveTimeout = max(configuration.timeout, .seconds(5))
        self.connector = WebhookConnector(
            configuration: client,
            allowPrivateAddresses: configuration.policy.allowPrivateAddresses,
            resolveTimeout: resolveTimeout,
            resolve: configuration.resolve
        )
        self.lease = resolveTimeout + configuration.timeout + .seconds(1) + resolveTimeout
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { await self.dispatch() }
        await connector.shutdown()
    }

    /// Keeps up to `concurrency` attempts in flight (`perEndpoint` per endpoint), taking more from the queue as
    /// they finish; with nothing due, or every slot taken, it looks again after `pollInterval` (backing off to a
    /// minute while the store fails).
    func dispatch() async {
        await withDiscardingTaskGroup { group in
            var failures = 0
            while !Task.isCancelled {
                let room = inFlight.withLock { shares.room(endpoints: $0.endpoints, tenants: $0.tenants) }
                let free = room.free
                var taken: [WebhookOutboxItem] = []
                if free > 0 {
                    do {
                        taken = try await store.dueWebhookEvents(
                            now: Date(),
                            room: room,
                            lease: lease
                        )
                        failures = 0
                    } catch {
                        failures += 1
                        logger.error("cannot read the webhook queue", metadata: ["error": "\(error)"])
                    }
                }
                var endpoints: [TenantID: [String: WebhookEndpoint]] = [:]
                for item in taken {
                    if endpoints[item.tenant] == nil {
                        let list = (try? await store.webhookEndpoints(tenant: item.tenant)) ?? []
                        endpoints[item.tenant] = Dictionary(list.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
                    }
                    // Deleted meanwhile: its events went with it.
                    guard let endpoint = endpoints[item.tenant]?[item.endpoint] else { continue }
                    inFlight.withLock {
                        $0.endpoints[item.endpoint, default: 0] += 1
                        $0.tenants[item.tenant, default: 0] += 1
                    }
                    group.addTask {
                        await self.attempt(item, endpoint)
                        self.inFlight.withLock { counts in
                            counts.endpoints[item.endpoint, default: 1] -= 1
                            if counts.endpoints[item.endpoint] == 0 { counts.endpoints[item.endpoint] = nil }
                            counts.tenants[item.tenant, default: 1] -= 1
                            if counts.tenants[item.tenant] == 0 { counts.tenants[item.tenant] = nil }
                        }
                    }
                }
                if taken.count < free || free <= 0 {
                    let pause =
                        failures > 0
                        ? min(Duration.seconds(1 << min(failures, 6)), .seconds(60)) : configuration.pollInterval
                    try? await Task.sleep(for: pause)
                }
            }
            group.cancelAll()
        }
    }

    /// Sends one event and records what came of it.
    func attempt(_ item: WebhookOutboxItem, _ endpoint: WebhookEndpoint) async {
        let started = ContinuousClock.now
        let now = Date()
        let body = item.body
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "impulse-broker-webhooks")
        request.headers.add(name: "Impulse-Event-ID", value: "evt_\(item.id)")
        request.headers.add(name: "Impulse-Event-Type", value: item.event.rawValue)
        request.headers.add(
            name: WebhookSignature.header,
            value: WebhookSignature.sign(
                body: body,
                timestamp: Int(now.timeIntervalSince1970),
                secrets: endpoint.signingSecrets(at: now)
            )
        )
        request.body = .bytes(ByteBuffer(string: body))
        var status: Int?
        var failure: String?
        do {
            // A second past the connect and read timeouts: a silent port ends as a failed connect, not as a
            // timeout (which would tell it apart from a closed one).
            let timeout = TimeAmount.seconds(Int64(configuration.timeout.components.seconds) + 1)
            let code = try await connector.execute(url: endpoint.url) { [request] client in
                let response = try await client.execute(request, timeout: timeout)
                // The answer's body is read and thrown away: at most 64 KiB of it, within the attempt's timeout
                // (a receiver dripping it cannot hold the attempt past its lease).
                let readUntil = ContinuousClock.now + .seconds(timeout.nanoseconds / 1_000_000_000)
                var read = 0
                for try await part in response.body {
                    read += part.readableBytes
                    if read > 65_536 || ContinuousClock.now > readUntil { break }
                }
                return Int(response.status.code)
            }
            status = code
            if !(200..<300).contains(code) { failure = "answered \(code)" }
        } catch {
            failure = Self.describe(error)
            logger.debug(
                "webhook attempt failed",
                metadata: ["tenant.id": "\(item.tenant)", "webhook.id": "\(item.endpoint)", "error": "\(error)"]
            )
        }
        let duration = started.duration(to: .now)
        let result: WebhookAttemptResult
        if let failure {
            result = configuration.retry.afterFailure(
                attempts: item.attempts + 1,
                createdAt: item.createdAt,
                now: Date(),
                status: status,
                error: failure,
                jitter: Double.random(in: 0...1)
            )
            if case .dropped = result {
                logger.warning(
                    "webhook event dropped after a day of failures",
                    metadata: ["tenant.id": "\(item.tenant)", "webhook.id": "\(item.endpoint)", "error": "\(failure)"]
                )
            }
        } else {
            result = .delivered(status: status ?? 200)
        }
        do {
            try await store.recordWebhookAttempt(item, result: result, at: Date(), duration: duration.seconds)
        } catch {
            // The lease ends and the event is tried again: at least once.
            logger.error(
                "cannot record a webhook attempt",
                metadata: ["webhook.id": "\(item.endpoint)", "error": "\(error)"]
            )
        }
    }

    /// A short description of a failed attempt, as the tenant's admins see it: never the URL's query (it may hold
    /// a token), the address the host resolved to, the port, or whether something listened there (a refused
    /// connection, a silent one and a failed TLS handshake read the same), so attempts cannot scan a network.
    /// The broker's own log has the error at debug level.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let refused as WebhookConnector.Refused:
            return refused.description
        case let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout:
            return "timed out"
        default:
            return "could not connect to the endpoint over TLS"
        }
    }
}
