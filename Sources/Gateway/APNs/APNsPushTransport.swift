import Engine
import Foundation
import Logging
import NIOSSL
import Synchronization

/// Where one APNs environment is, and how to trust it.
public struct APNsEndpoint: Sendable {
    public var host: String
    public var port: Int
    public var tls: TLSConfiguration
    public var serverHostname: String?

    public init(
        host: String,
        port: Int,
        tls: TLSConfiguration = .makeClientConfiguration(),
        serverHostname: String? = nil
    ) {
        self.host = host
        self.port = port
        self.tls = tls
        self.serverHostname = serverHostname
    }

    public static let production = APNsEndpoint(host: "api.push.apple.com", port: 443)
    public static let sandbox = APNsEndpoint(host: "api.sandbox.push.apple.com", port: 443)
}

/// How a tenant (or the broker's default) authenticates to APNs.
public enum APNsCredential: Sendable {
    /// A provider-token signing key (`.p8`).
    case token(APNsSigningIdentity)
    /// A TLS client certificate: `tls` carries the chain and key (see `APNsCertificate`), added to each endpoint's.
    case certificate(chain: [NIOSSLCertificateSource], key: NIOSSLPrivateKeySource)
}

/// The push transport on APNs: one client (connection pool) per tenant identity and environment.
///
/// Tenants without their own identity use the default one; one identity never shares a connection with
/// another (APNs binds a connection to one team).
public final class APNsPushTransport: PushTransport {
    struct Key: Hashable {
        var tenant: TenantID?
        var environment: APNsEnvironment
    }

    private let endpoints: [APNsEnvironment: APNsEndpoint]
    private let identities: [TenantID: APNsCredential]
    private let defaultIdentity: APNsCredential?
    private let clientConfiguration: @Sendable (APNsEndpoint) -> APNsClientConfiguration
    private let logger: Logger
    private let clients = Mutex<[Key: (client: APNsClient, tokens: ProviderTokenCache?)]>([:])
    /// One token cache per signing identity, shared by its pools in both environments.
    private let tokenCaches = Mutex<[String: ProviderTokenCache]>([:])
    private let tokenDirectory: String?

    public init(
        endpoints: [APNsEnvironment: APNsEndpoint],
        identities: [TenantID: APNsCredential] = [:],
        defaultIdentity: APNsCredential?,
        tokenDirectory: String? = nil,
        logger: Logger,
        clientConfiguration: @escaping @Sendable (APNsEndpoint) -> APNsClientConfiguration = {
            APNsClientConfiguration(host: $0.host, port: $0.port, tls: $0.tls, serverHostname: $0.serverHostname)
        }
    ) {
        self.endpoints = endpoints
        self.identities = identities
        self.defaultIdentity = defaultIdentity
        self.tokenDirectory = tokenDirectory
        self.clientConfiguration = clientConfiguration
        self.logger = logger
    }

    public func send(_ push: OutboundPush) async -> PushResult {
        guard let client = client(tenant: push.tenant, environment: push.device.environment) else {
            return .rejected(status: 403, reason: "MissingProviderToken", timestamp: nil)
        }
        var payloads = PayloadCache()
        switch Self.notification(push, payloads: &payloads) {
        case .ready(let notification): return await client.send(notification)
        case .refused(let result): return result
        }
    }

    /// One hop per pool: the pushes are grouped by the client (identity and environment) that sends them.
    public func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        var answers = [PushAnswer?](repeating: nil, count: pushes.count)
        var groups: [ObjectIdentifier: Group] = [:]
        var payloads = PayloadCache()
        // A batch is nearly always one tenant's pushes to one environment: its client is looked up once (three
        // hash lookups and a lock per push were 1.1% of the gateway's time).
        var last: (tenant: TenantID, environment: APNsEnvironment, client: APNsClient?)?
        // By position: iterating the pushes copied each one, and its strings.
        for index in pushes.indices {
            let tenant = pushes[index].tenant
            let environment = pushes[index].device.environment
            let found: APNsClient?
            if let last, last.tenant == tenant, last.environment == environment {
                found = last.client
            } else {
                found = client(tenant: tenant, environment: environment)
                last = (tenant, environment, found)
            }
            guard let client = found else {
                answers[index] = PushAnswer(
                    result: .rejected(status: 403, reason: "MissingProviderToken", timestamp: nil),
                    latency: .zero
                )
                continue
            }
            switch Self.notification(pushes[index], payloads: &payloads) {
            case .ready(let notification):
                groups[ObjectIdentifier(client), default: Group(client, capacity: pushes.count)].add(
                    index,
                    notification
                )
            case .refused(let result): answers[index] = PushAnswer(result: result, latency: .zero)
            }
        }
        await withTaskGroup(of: (indices: [Int], answers: [PushAnswer]).self) { group in
            for entry in groups.values {
                group.addTask {
                    let indices = entry.indices
                    let answers = await entry.client.send(batch: entry.notifications) { position, accepted in
                        onAnswer(indices[position], accepted)
                    }
                    return (indices, answers)
                }
            }
            for await sent in group {
                for (index, answer) in zip(sent.indices, sent.answers) { answers[index] = answer }
            }
        }
        return answers.map { $0! }
    }

    /// The pushes of a batch that go through one client, and their places in the batch.
    struct Group {
        let client: APNsClient
        var indices: [Int] = []
        var notifications: [APNsNotification] = []

        init(_ client: APNsClient, capacity: Int) {
            self.client = client
            indices.reserveCapacity(capacity)
            notifications.reserveCapacity(capacity)
        }

        mutating func add(_ index: Int, _ notification: APNsNotification) {
            indices.append(index)
            notifications.append(notification)
        }
    }

    enum Prepared {
        case ready(APNsNotification)
        case refused(PushResult)
    }

    /// The payloads of a batch's pushes, by what they are made of: a batch's pushes mostly share an impulse and
    /// a badge, and encoding each push's again was 2% of the gateway's time.
    struct PayloadCache {
        struct Key: Hashable {
            var impulse: ImpulseID
            var title: String
            var badge: Int
        }

        private var payloads: [Key: Data] = [:]

        mutating func payload(for push: OutboundPush) throws -> Data {
            let key = Key(impulse: push.impulse, title: push.title, badge: push.badge)
            if let known = payloads[key] { return known }
            let payload = try ImpulsePayload(title: push.title, badge: push.badge, impulseID: push.impulse.rawValue)
                .encoded()
            payloads[key] = payload
            return payload
        }
    }

    /// The push as APNs receives it, or the rejection APNs would give it.
    static func notification(_ push: OutboundPush, payloads: inout PayloadCache) -> Prepared {
        do {
            let notification = try APNsNotification(
                token: push.device.token,
                topic: push.device.topic,
                expiration: push.expiresAt,
                generatedID: APNsNotification.deterministicID(
                    push.tenant.rawValue,
                    push.delivery.description,
                    push.device.token.rawValue
                ),
                collapseID: push.collapseID,
                payload: try payloads.payload(for: push)
            )
            return .ready(notification)
        } catch {
            return .refused(.rejected(status: 413, reason: "PayloadTooLarge", timestamp: nil))
        }
    }

    public func renewCredentials(tenant: TenantID) async {
        let entries = clients.withLock { clients in
            clients.filter { $0.key.tenant == tenant || $0.key.tenant == nil }.map(\.value)
        }
        for entry in entries {
            if (try? entry.tokens?.renew()) == true { await entry.client.retireConnections() }
        }
    }

    /// One pool: whose it is (nil: the default identity's), its environment, and its provider token's age.
    public struct Pool: Sendable {
        public var tenant: TenantID?
        public var environment: APNsEnvironment
        public var client: APNsClient
        public var tokenIssuedAt: Date?
    }

    /// The pools, for inspection.
    public var pools: [Pool] {
        clients.withLock { clients in
            clients.map {
                Pool(
                    tenant: $0.key.tenant,
                    environment: $0.key.environment,
                    client: $0.value.client,
                    tokenIssuedAt: $0.value.tokens?.issuedAt
                )
            }
        }
    }

    /// Whether a tenant pushes with its own identity (else with the default one).
    public func hasOwnIdentity(_ tenant: TenantID) -> Bool { identities[tenant] != nil }

    /// The pools, for inspection and shutdown.
    public var allClients: [APNsClient] { clients.withLock { $0.values.map(\.client) } }

    public func shutdown() async {
        for client in allClients { await client.shutdown() }
    }

    private func client(tenant: TenantID, environment: APNsEnvironment) -> APNsClient? {
        let own = identities[tenant]
        guard let identity = own ?? defaultIdentity, let endpoint = endpoints[environment] else { return nil }
        let key = Key(tenant: own == nil ? nil : tenant, environment: environment)
        return clients.withLock { clients in
            if let existing = clients[key] { return existing.client }
            let client: APNsClient
            var tokens: ProviderTokenCache?
            switch identity {
            case .token(let signing):
                let cache = tokenCaches.withLock { caches in
                    let id = "\(signing.teamID)/\(signing.keyID)"
                    if let shared = caches[id], shared.identity == signing { return shared }
                    let cache = ProviderTokenCache(identity: signing, directory: tokenDirectory)
                    caches[id] = cache
                    return cache
                }
                tokens = cache
                client = APNsClient(
                    configuration: clientConfiguration(endpoint),
                    authentication: .token(cache),
                    logger: logger
                )
            case .certificate(let chain, let privateKey):
                var withCertificate = endpoint
                withCertificate.tls.certificateChain = chain
                withCertificate.tls.privateKey = privateKey
                client = APNsClient(
                    configuration: clientConfiguration(withCertificate),
                    authentication: .certificate,
                    logger: logger
                )
            }
            clients[key] = (client, tokens)
            return client
        }
    }
}
