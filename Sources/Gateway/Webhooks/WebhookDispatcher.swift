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
    public var retry: WebhookRetryPolicy
    /// How often the queue is looked at while it is idle.
    public var pollInterval: Duration

    public init(
        policy: WebhookTargetPolicy = WebhookTargetPolicy(),
        trustRootsFile: String? = nil,
        timeout: Duration = .seconds(10),
        concurrency: Int = 32,
        perEndpoint: Int = 4,
        retry: WebhookRetryPolicy = WebhookRetryPolicy(),
        pollInterval: Duration = .milliseconds(500)
    ) {
        self.policy = policy
        self.trustRootsFile = trustRootsFile
        self.timeout = timeout
        self.concurrency = concurrency
        self.perEndpoint = perEndpoint
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
    let client: HTTPClient
    let logger: Logger
    /// Attempts in flight, by endpoint.
    private let inFlight = Mutex<[String: Int]>([:])

    init(store: any WebhookStore, configuration: WebhookConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
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
        self.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: client)
    }

    func run() async throws {
        await cancelWhenGracefulShutdown { await self.dispatch() }
        try? await client.shutdown()
    }

    /// Keeps up to `concurrency` attempts in flight (`perEndpoint` per endpoint), taking more from the queue as
    /// they finish; with nothing due, or every slot taken, it looks again after `pollInterval` (backing off to a
    /// minute while the store fails).
    func dispatch() async {
        await withDiscardingTaskGroup { group in
            var failures = 0
            while !Task.isCancelled {
                let (total, saturated) = inFlight.withLock { counts in
                    (counts.values.reduce(0, +), Set(counts.filter { $0.value >= configuration.perEndpoint }.keys))
                }
                let free = configuration.concurrency - total
                var taken: [WebhookOutboxItem] = []
                if free > 0 {
                    do {
                        taken = try await store.dueWebhookEvents(
                            now: Date(),
                            limit: free,
                            lease: configuration.timeout * 3,
                            excluding: saturated
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
                    inFlight.withLock { $0[item.endpoint, default: 0] += 1 }
                    group.addTask {
                        await self.attempt(item, endpoint)
                        self.inFlight.withLock { counts in
                            counts[item.endpoint, default: 1] -= 1
                            if counts[item.endpoint] == 0 { counts[item.endpoint] = nil }
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
            let response = try await client.execute(
                request,
                timeout: .seconds(Int64(configuration.timeout.components.seconds))
            )
            status = Int(response.status.code)
            // The answer's body is read and thrown away, at most 64 KiB of it.
            var read = 0
            for try await part in response.body {
                read += part.readableBytes
                if read > 65_536 { break }
            }
            if !(200..<300).contains(Int(response.status.code)) { failure = "answered \(response.status.code)" }
        } catch {
            failure = Self.describe(error)
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

    /// A short description of a failed attempt, without the URL's query (it may hold a token).
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout:
            return "timed out"
        case let error as HTTPClientError where error == .connectTimeout:
            return "connect timed out"
        case let error as NIOSSLError:
            return "TLS: \(error)"
        default:
            return String(String(describing: error).prefix(200))
        }
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
