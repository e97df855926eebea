import Engine
import Foundation
import Logging
import NIOSSL
import Synchronization

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
        /// The uploaded credential the pool pushes with (nil: the configuration's).
        var credential: String?
    }

    /// A credential uploaded over the admin API, opened.
    public struct Uploaded: Sendable {
        public var id: String
        public var credential: APNsCredential

        public init(id: String, credential: APNsCredential) {
            self.id = id
            self.credential = credential
        }
    }

    /// A tenant's uploaded credentials: the active one, and a candidate tried first until APNs answers it.
    struct Rotation {
        var active: Uploaded?
        var candidate: Uploaded?
    }

    /// Which identity a push goes out with.
    struct Choice {
        var key: Key
        var credential: APNsCredential
        /// The candidate's id when the push tries a pending credential.
        var candidate: String?
    }

    /// What a push made with a candidate credential told of it.
    public typealias CandidateListener = @Sendable (TenantID, String, APNsCredentialSelection.Verdict) async -> Void

    private let endpoints: [APNsEnvironment: APNsEndpoint]
    private let identities: [TenantID: APNsCredential]
    private let defaultIdentity: APNsCredential?
    private let uploaded = Mutex<[TenantID: Rotation]>([:])
    private let listener = Mutex<CandidateListener?>(nil)
    /// Rounds in a row in which every push made with a candidate failed to reach APNs, per candidate.
    private let candidateFailures = Mutex<[String: Int]>([:])
    private let clientConfiguration: @Sendable (APNsEndpoint) -> HTTP2PushClientConfiguration
    private let logger: Logger
    private let clients = Mutex<[Key: (client: HTTP2PushClient, tokens: ProviderTokenCache?)]>([:])
    /// One token cache per signing identity, shared by its pools in both environments.
    private let tokenCaches = Mutex<[String: ProviderTokenCache]>([:])
    /// Where the deployment's nodes share one provider token per key (nil: each process keeps its own).
    private let tokenStore: (any ProviderTokenStore)?

    public init(
        endpoints: [APNsEnvironment: APNsEndpoint],
        identities: [TenantID: APNsCredential] = [:],
        defaultIdentity: APNsCredential?,
        tokenStore: (any ProviderTokenStore)? = nil,
        logger: Logger,
        clientConfiguration: @escaping @Sendable (APNsEndpoint) -> HTTP2PushClientConfiguration = {
            HTTP2PushClientConfiguration($0)
        }
    ) {
        self.endpoints = endpoints
        self.identities = identities
        self.defaultIdentity = defaultIdentity
        self.tokenStore = tokenStore
        self.clientConfiguration = clientConfiguration
        self.logger = logger
    }

    public func send(_ push: OutboundPush) async -> PushResult {
        guard let choice = choice(tenant: push.tenant, environment: push.device.environment) else {
            return .rejected(status: 403, reason: "MissingProviderToken", timestamp: nil)
        }
        var payloads = PayloadCache()
        switch Self.notification(push, payloads: &payloads) {
        case .ready(let notification):
            let result = await client(choice).send(notification)
            guard let candidate = choice.candidate, let verdict = judge(candidate, [result]) else { return result }
            await settle(push.tenant, candidate, verdict)
            guard case .refused = verdict else { return result }
            // The candidate was refused: the push goes out again with the credential it was to replace.
            return await send(push)
        case .refused(let result): return result
        }
    }

    /// What a round of pushes made with a candidate says of it: APNs' verdict on the credential, or, when every
    /// push of two rounds in a row failed to reach APNs (a certificate turned away at the TLS handshake never
    /// gets an answer), a refusal.
    private func judge(_ candidate: String, _ results: [PushResult]) -> APNsCredentialSelection.Verdict? {
        let verdicts = results.compactMap(APNsCredentialSelection.verdict(on:))
        if let verdict = verdicts.first(where: { $0 == .proven }) ?? verdicts.first {
            candidateFailures.withLock { $0[candidate] = nil }
            return verdict
        }
        let unreachable = results.allSatisfy { if case .transportFailure = $0 { true } else { false } }
        guard !results.isEmpty, unreachable else {
            candidateFailures.withLock { $0[candidate] = nil }
            return nil
        }
        let rounds = candidateFailures.withLock { failures in
            failures[candidate, default: 0] += 1
            return failures[candidate] ?? 0
        }
        guard rounds >= 2 else { return nil }
        candidateFailures.withLock { $0[candidate] = nil }
        return .refused(reason: "ConnectionFailed")
    }

    /// Whether a push made with a refused candidate goes out again with the previous credential: it was refused
    /// for the credential, or never reached APNs.
    static func turnedAway(_ result: PushResult) -> Bool {
        if case .transportFailure = result { return true }
        if case .refused = APNsCredentialSelection.verdict(on: result) { return true }
        return false
    }

    /// Installs a tenant's uploaded credentials (on start, and when the change feed says they changed); pools of
    /// credentials no longer named are drained: their streams finish, then they close.
    public func install(tenant: TenantID, active: Uploaded?, candidate: Uploaded?) {
        uploaded.withLock { rotations in
            if active == nil && candidate == nil {
                rotations[tenant] = nil
            } else {
                rotations[tenant] = Rotation(active: active, candidate: candidate)
            }
        }
        retire(tenant: tenant, keeping: Set([active?.id, candidate?.id].compactMap { $0 }))
    }

    /// Whom to tell when a push made with a candidate credential proved or refused it.
    public func onCandidateVerdict(_ listener: @escaping CandidateListener) {
        self.listener.withLock { $0 = listener }
    }

    /// Applies a verdict on this node at once (the store and other nodes follow through the listener): a proven
    /// candidate becomes the active credential, a refused one is dropped.
    private func settle(_ tenant: TenantID, _ candidate: String, _ verdict: APNsCredentialSelection.Verdict) async {
        let settled: Rotation? = uploaded.withLock { rotations in
            guard var rotation = rotations[tenant], let pending = rotation.candidate, pending.id == candidate else {
                return nil
            }
            if case .proven = verdict { rotation.active = pending }
            rotation.candidate = nil
            rotations[tenant] = rotation
            return rotation
        }
        guard let settled else { return }
        retire(tenant: tenant, keeping: Set([settled.active?.id].compactMap { $0 }))
        if case .refused(let reason) = verdict {
            logger.error(
                "APNs refused the tenant's new credential; its pushes go on with the previous one",
                metadata: ["tenant.id": "\(tenant)", "apns.reason": "\(reason)", "apns.credential": "\(candidate)"]
            )
        } else {
            logger.notice(
                "the tenant's new APNs credential pushed successfully and replaces the previous one",
                metadata: ["tenant.id": "\(tenant)", "apns.credential": "\(candidate)"]
            )
        }
        await listener.withLock { $0 }?(tenant, candidate, verdict)
    }

    /// Drains and forgets the tenant's pools of uploaded credentials other than `keeping` (and, when it has an
    /// uploaded credential, the pools of the configuration's identities it used before).
    private func retire(tenant: TenantID, keeping: Set<String>) {
        let retired = clients.withLock { clients in
            let gone = clients.keys.filter { key in
                guard key.tenant == tenant else { return false }
                if let credential = key.credential { return !keeping.contains(credential) }
                return !keeping.isEmpty
            }
            return gone.compactMap { clients.removeValue(forKey: $0)?.client }
        }
        for client in retired {
            Task {
                await client.retireConnections()
                // The streams in flight finish on the old connections (at most a minute), then they close.
                for _ in 0..<60 {
                    if await client.snapshot().allSatisfy({ $0.inFlight == 0 }) { break }
                    try? await Task.sleep(for: .seconds(1))
                }
                await client.shutdown()
            }
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
        var last: (tenant: TenantID, environment: APNsEnvironment, choice: Choice?, client: HTTP2PushClient?)?
        // By position: iterating the pushes copied each one, and its strings.
        for index in pushes.indices {
            let tenant = pushes[index].tenant
            let environment = pushes[index].device.environment
            let found: HTTP2PushClient?
            let chosen: Choice?
            if let last, last.tenant == tenant, last.environment == environment {
                found = last.client
                chosen = last.choice
            } else {
                chosen = choice(tenant: tenant, environment: environment)
                found = chosen.map(client)
                last = (tenant, environment, chosen, found)
            }
            guard let client = found, let chosen else {
                answers[index] = PushAnswer(
                    result: .rejected(status: 403, reason: "MissingProviderToken", timestamp: nil),
                    latency: .zero
                )
                continue
            }
            switch Self.notification(pushes[index], payloads: &payloads) {
            case .ready(let notification):
                groups[ObjectIdentifier(client), default: Group(client, chosen, capacity: pushes.count)].add(
                    index,
                    notification
                )
            case .refused(let result): answers[index] = PushAnswer(result: result, latency: .zero)
            }
        }
        var refused: [Int] = []
        await withTaskGroup(of: (indices: [Int], answers: [PushAnswer], candidate: String?).self) { group in
            for entry in groups.values {
                let candidate = entry.choice.candidate
                group.addTask {
                    let indices = entry.indices
                    let answers = await entry.client.send(batch: entry.notifications) { position, accepted in
                        onAnswer(indices[position], accepted)
                    }
                    return (indices, answers, candidate)
                }
            }
            for await sent in group {
                for (index, answer) in zip(sent.indices, sent.answers) { answers[index] = answer }
                guard let candidate = sent.candidate else { continue }
                // A push made with a candidate credential: the first verdict settles it.
                guard let verdict = judge(candidate, sent.answers.map(\.result)),
                    let tenant = sent.indices.first.map({ pushes[$0].tenant })
                else { continue }
                await settle(tenant, candidate, verdict)
                guard case .refused = verdict else { continue }
                for (index, answer) in zip(sent.indices, sent.answers) where Self.turnedAway(answer.result) {
                    refused.append(index)
                }
            }
        }
        // Pushes the candidate's refusal turned away go out again with the credential it was to replace.
        if !refused.isEmpty {
            let resent = refused
            let again = await send(batch: resent.map { pushes[$0] }) { position, accepted in
                onAnswer(resent[position], accepted)
            }
            for (index, answer) in zip(resent, again) { answers[index] = answer }
        }
        return answers.map { $0! }
    }

    /// The pushes of a batch that go through one client, and their places in the batch.
    struct Group {
        let client: HTTP2PushClient
        let choice: Choice
        var indices: [Int] = []
        var notifications: [APNsNotification] = []

        init(_ client: HTTP2PushClient, _ choice: Choice, capacity: Int) {
            self.client = client
            self.choice = choice
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
            if (try? await entry.tokens?.renew()) == true { await entry.client.retireConnections() }
        }
    }

    /// When each APNs certificate this node pushes with expires: the default identity's (tenant nil), the
    /// configured tenants' and the active uploaded ones. Signing keys do not expire and are not listed.
    public var certificateExpiries: [(tenant: TenantID?, expiresAt: Date)] {
        var expiries: [(tenant: TenantID?, expiresAt: Date)] = []
        if let date = defaultIdentity?.certificateExpiry { expiries.append((nil, date)) }
        for (tenant, credential) in identities {
            if let date = credential.certificateExpiry { expiries.append((tenant, date)) }
        }
        for (tenant, rotation) in uploaded.withLock({ $0 }) {
            if let date = rotation.active?.credential.certificateExpiry { expiries.append((tenant, date)) }
        }
        return expiries
    }

    /// One pool: whose it is (nil: the default identity's), its environment, and its provider token's age.
    public struct Pool: Sendable {
        public var tenant: TenantID?
        public var environment: APNsEnvironment
        public var client: HTTP2PushClient
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
    public func hasOwnIdentity(_ tenant: TenantID) -> Bool {
        identities[tenant] != nil || uploaded.withLock { $0[tenant] != nil }
    }

    /// The pools, for inspection and shutdown.
    public var allClients: [HTTP2PushClient] { clients.withLock { $0.values.map(\.client) } }

    public func shutdown() async {
        await withTaskGroup(of: Void.self) { group in
            for client in allClients { group.addTask { await client.shutdown() } }
        }
    }

    /// The identity a tenant's push goes out with: its candidate credential, else its active uploaded one, else
    /// its identity from the configuration, else the default one.
    private func choice(tenant: TenantID, environment: APNsEnvironment) -> Choice? {
        guard endpoints[environment] != nil else { return nil }
        if let rotation = uploaded.withLock({ $0[tenant] }) {
            if let candidate = rotation.candidate {
                return Choice(
                    key: Key(tenant: tenant, environment: environment, credential: candidate.id),
                    credential: candidate.credential,
                    candidate: candidate.id
                )
            }
            if let active = rotation.active {
                return Choice(
                    key: Key(tenant: tenant, environment: environment, credential: active.id),
                    credential: active.credential
                )
            }
        }
        let own = identities[tenant]
        guard let identity = own ?? defaultIdentity else { return nil }
        return Choice(key: Key(tenant: own == nil ? nil : tenant, environment: environment), credential: identity)
    }

    /// A candidate's pushes wait at most ten seconds for a connection: two such rounds without one refuse it, and
    /// the pushes go out with the previous credential (rather than waiting a minute each).
    private func patience(
        _ configuration: HTTP2PushClientConfiguration,
        _ choice: Choice
    ) -> HTTP2PushClientConfiguration {
        guard choice.candidate != nil else { return configuration }
        var configuration = configuration
        configuration.unreachableWait = min(configuration.unreachableWait, .seconds(10))
        return configuration
    }

    private func client(_ choice: Choice) -> HTTP2PushClient {
        let key = choice.key
        let identity = choice.credential
        let endpoint = endpoints[key.environment]!
        return clients.withLock { clients in
            if let existing = clients[key] { return existing.client }
            let client: HTTP2PushClient
            var tokens: ProviderTokenCache?
            switch identity {
            case .token(let signing):
                let cache = tokenCaches.withLock { caches in
                    let id = "\(signing.teamID)/\(signing.keyID)"
                    if let shared = caches[id], shared.identity == signing { return shared }
                    let cache = ProviderTokenCache(identity: signing, store: tokenStore, logger: logger)
                    caches[id] = cache
                    return cache
                }
                tokens = cache
                client = HTTP2PushClient(
                    configuration: patience(clientConfiguration(endpoint), choice),
                    authentication: .token(cache),
                    logger: logger
                )
            case .certificate(let chain, let privateKey):
                var withCertificate = endpoint
                withCertificate.tls.certificateChain = chain
                withCertificate.tls.privateKey = privateKey
                client = HTTP2PushClient(
                    configuration: patience(clientConfiguration(withCertificate), choice),
                    authentication: .certificate,
                    logger: logger
                )
            }
            clients[key] = (client, tokens)
            return client
        }
    }
}
