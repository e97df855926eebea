import Engine
import Foundation
import Logging
import NIOSSL
import Synchronization

/// The push transport on FCM HTTP v1: one connection pool and one access token per service account.
///
/// Which account a tenant's Android pushes use, first found: the service account uploaded over the admin API and
/// not yet proven (the candidate), the uploaded one proven by an accepted push (active), the tenant's key file in
/// the configuration, the broker's default key file. The rotation is APNs credentials': a candidate is proven by
/// the first push FCM accepts with it (then it replaces the active one on every node) and refused when FCM refuses
/// the account (then the pushes it turned away go out again with the account it was to replace).
///
/// - No account at all: the tenant's Android pushes are refused (`NoFCMCredential`), which drops them and keeps the
///   devices.
/// - FCM answered 401: the access token is dropped and the answer is an expired credential, which the gateway's
///   resend loop sends again with a fresh token. A 401 on that fresh token before FCM accepted a push with it, a
///   403, SENDER_ID_MISMATCH or a token endpoint refusing the assertion marks the account failed. Its pushes are then
///   refused at once (`FCMCredentialFailed`), without reaching FCM, until the tenant's account is replaced.
public final class FCMPushTransport: PushTransport {
    public static let noCredential = "NoFCMCredential"
    public static let credentialFailed = "FCMCredentialFailed"

    final class Pool: Sendable {
        let client: HTTP2PushClient
        let tokens: FCMAccessTokens
        /// The uploaded credential's id (nil: a configured key file).
        let uploadedID: String?
        /// Why FCM refused the account (nil: usable).
        let failed = Mutex<String?>(nil)

        init(client: HTTP2PushClient, tokens: FCMAccessTokens, uploadedID: String?) {
            self.client = client
            self.tokens = tokens
            self.uploadedID = uploadedID
        }
    }

    /// A service account uploaded over the admin API, opened.
    public struct Uploaded: Sendable {
        public var id: String
        public var account: FCMServiceAccount

        public init(id: String, account: FCMServiceAccount) {
            self.id = id
            self.account = account
        }
    }

    struct Pools {
        /// The tenants' configured key files.
        var configured: [TenantID: Pool] = [:]
        /// The broker's default key file.
        var fallback: Pool?
        /// The tenants' uploaded accounts.
        var uploaded: [TenantID: (active: Pool?, candidate: Pool?)] = [:]

        func pool(_ tenant: TenantID) -> Pool? {
            let uploaded = uploaded[tenant]
            return uploaded?.candidate ?? uploaded?.active ?? configured[tenant] ?? fallback
        }

        var all: [Pool] {
            Array(configured.values) + (fallback.map { [$0] } ?? [])
                + uploaded.values.flatMap { [$0.active, $0.candidate].compactMap { $0 } }
        }
    }

    private let endpoint: PushEndpoint
    /// Where every account's tokens are exchanged, in place of its key's `token_uri` (the simulator's); nil: each
    /// key's own.
    private let tokenURI: URL?
    private let clientConfiguration: @Sendable (PushEndpoint) -> HTTP2PushClientConfiguration
    private let logger: Logger
    private let pools = Mutex(Pools())
    private let listener = Mutex<APNsPushTransport.CandidateListener?>(nil)

    public init(
        endpoint: PushEndpoint = .fcm,
        accounts: [TenantID: FCMServiceAccount] = [:],
        defaultAccount: FCMServiceAccount? = nil,
        tokenURI: URL? = nil,
        logger: Logger,
        clientConfiguration: @escaping @Sendable (PushEndpoint) -> HTTP2PushClientConfiguration = {
            HTTP2PushClientConfiguration($0)
        }
    ) {
        self.endpoint = endpoint
        self.tokenURI = tokenURI
        self.clientConfiguration = clientConfiguration
        self.logger = logger
        for (tenant, account) in accounts { setAccount(account, tenant: tenant) }
        if let defaultAccount {
            let pool = pool(defaultAccount, uploadedID: nil)
            pools.withLock { $0.fallback = pool }
        }
    }

    /// Gives the tenant a (new) configured service account: its pushes use it from now on (unless it has an
    /// uploaded one), with a fresh pool and token.
    public func setAccount(_ account: FCMServiceAccount, tenant: TenantID) {
        let pool = pool(account, uploadedID: nil)
        let old = pools.withLock { pools in
            defer { pools.configured[tenant] = pool }
            return pools.configured[tenant]
        }
        if let old { Task { await old.client.shutdown() } }
    }

    /// Puts the tenant's uploaded accounts in place (as the store has them): pools of accounts that stay are kept,
    /// with their connections and tokens.
    public func install(tenant: TenantID, active: Uploaded?, candidate: Uploaded?) {
        let retired = pools.withLock { pools -> [Pool] in
            let current = pools.uploaded[tenant]
            let kept = [current?.active, current?.candidate].compactMap { $0 }
            func reuse(_ uploaded: Uploaded?) -> Pool? {
                guard let uploaded else { return nil }
                return kept.first { $0.uploadedID == uploaded.id } ?? pool(uploaded.account, uploadedID: uploaded.id)
            }
            let next = (active: reuse(active), candidate: reuse(candidate))
            pools.uploaded[tenant] = next.active == nil && next.candidate == nil ? nil : next
            return kept.filter { $0 !== next.active && $0 !== next.candidate }
        }
        for pool in retired { Task { await pool.client.shutdown() } }
    }

    /// Where the verdicts on candidates go (the credential loader writes them to the store).
    public func onCandidateVerdict(_ listener: @escaping APNsPushTransport.CandidateListener) {
        self.listener.withLock { $0 = listener }
    }

    private func pool(_ account: FCMServiceAccount, uploadedID: String?) -> Pool {
        var account = account
        if let tokenURI { account.tokenURI = tokenURI }
        let tokens = FCMAccessTokens(
            account: account,
            tls: endpoint.tls,
            serverHostname: endpoint.serverHostname,
            logger: logger
        )
        let client = HTTP2PushClient(
            configuration: clientConfiguration(endpoint),
            authentication: .accessToken(tokens),
            dialect: .fcm,
            logger: logger
        )
        return Pool(client: client, tokens: tokens, uploadedID: uploadedID)
    }

    /// The pool a tenant's pushes go through now.
    private func pool(tenant: TenantID) -> Pool? {
        pools.withLock { $0.pool(tenant) }
    }

    /// Why the account the tenant's pushes use was refused, if it was.
    public func failure(tenant: TenantID) -> String? {
        pool(tenant: tenant)?.failed.withLock { $0 }
    }

    /// What `/inspect` shows of the pool a tenant's Android pushes use.
    public struct PoolView: Sendable {
        /// `uploaded` (over the admin API), `tenant` (its key file) or `default`.
        public var identity: String
        public var project: String
        public var client: HTTP2PushClient
        public var tokens: FCMAccessTokens
        /// Why FCM refused the account (nil: usable).
        public var failed: String?
    }

    public func poolView(tenant: TenantID) -> PoolView? {
        pools.withLock { pools in
            guard let pool = pools.pool(tenant) else { return nil }
            let identity =
                pool.uploadedID != nil ? "uploaded" : pools.configured[tenant] === pool ? "tenant" : "default"
            return PoolView(
                identity: identity,
                project: pool.tokens.account.projectID,
                client: pool.client,
                tokens: pool.tokens,
                failed: pool.failed.withLock { $0 }
            )
        }
    }

    public var allClients: [HTTP2PushClient] { pools.withLock { $0.all.map(\.client) } }

    public func send(_ push: OutboundPush) async -> PushResult {
        await send(batch: [push]) { _, _ in }.first!.result
    }

    public func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        var answers = [PushAnswer?](repeating: nil, count: pushes.count)
        var groups: [ObjectIdentifier: (pool: Pool, tenant: TenantID, indexes: [Int])] = [:]
        let now = Date()
        for index in pushes.indices {
            let tenant = pushes[index].tenant
            guard let pool = pool(tenant: tenant) else {
                answers[index] = Self.refusal(Self.noCredential)
                onAnswer(index, nil)
                continue
            }
            if let failed = pool.failed.withLock({ $0 }) {
                answers[index] = Self.refusal("\(Self.credentialFailed): \(failed)")
                onAnswer(index, nil)
                continue
            }
            groups[ObjectIdentifier(pool), default: (pool, tenant, [])].indexes.append(index)
        }
        var turnedAway: [Int] = []
        await withTaskGroup(of: (indexes: [Int], answers: [PushAnswer], resend: [Int]).self) { group in
            for (pool, tenant, indexes) in groups.values {
                group.addTask {
                    let answers = await self.send(
                        indexes.map { pushes[$0] },
                        tenant: tenant,
                        pool: pool,
                        now: now
                    ) { position, id in onAnswer(indexes[position], id) }
                    // A refused candidate: its refused pushes go out again with the account it was to replace.
                    let resend =
                        await self.judge(pool, tenant: tenant, answers.map(\.result)) == .refusedCandidate
                        ? zip(indexes, answers).filter { Self.credentialRefusal($0.1.result) != nil }.map(\.0) : []
                    return (indexes, answers, resend)
                }
            }
            for await part in group {
                for (index, answer) in zip(part.indexes, part.answers) { answers[index] = answer }
                turnedAway += part.resend
            }
        }
        if !turnedAway.isEmpty {
            let resent = turnedAway
            let again = await send(batch: resent.map { pushes[$0] }) { position, id in onAnswer(resent[position], id) }
            for (index, answer) in zip(resent, again) { answers[index] = answer }
        }
        return answers.map { $0! }
    }

    /// One account's pushes through its pool. A 401 drops the access token it refused, and answers
    /// `credentialExpired`: the gateway's resend loop sends the push again, with a fresh token. A 401 on the token
    /// fetched to replace a refused one keeps its `credentialRefused`: the account is refused.
    private func send(
        _ pushes: [OutboundPush],
        tenant: TenantID,
        pool: Pool,
        now: Date,
        onAnswer: @escaping @Sendable (Int, String?) -> Void
    ) async -> [PushAnswer] {
        let project = pool.tokens.account.projectID
        let messages = pushes.map { FCMMessage($0, project: project, now: now) }
        let used = try? await pool.tokens.token()
        var answers = await pool.client.send(batch: messages) { position, id in onAnswer(position, id) }
        if let used, pool.tokens.renewalUnproven.withLock({ $0 }),
            answers.contains(where: { if case .accepted = $0.result { true } else { false } })
        {
            await pool.tokens.accepted(used)
        }
        let unauthenticated = answers.indices.filter { answers[$0].result.refusal?.status == 401 }
        guard !unauthenticated.isEmpty, let used, !(await pool.tokens.isRenewal(used)) else { return answers }
        await pool.tokens.invalidate(used)
        for index in unauthenticated {
            guard case .refused(let channel, let status, let reason, _) = answers[index].result else { continue }
            answers[index].result = .refused(
                channel: channel,
                status: status,
                reason: reason,
                outcome: .credentialExpired
            )
        }
        return answers
    }

    enum Judgement { case none, proven, refusedCandidate, failed }

    /// What a pool's answers say of its account: an accepted push proves a candidate; a credential refusal refuses
    /// a candidate (retired: the pushes fall back to the account it was to replace) or marks any other account
    /// failed.
    private func judge(_ pool: Pool, tenant: TenantID, _ results: [PushResult]) async -> Judgement {
        let refusal = results.lazy.compactMap(Self.credentialRefusal).first
        let accepted = results.contains { if case .accepted = $0 { true } else { false } }
        if let id = pool.uploadedID, pools.withLock({ $0.uploaded[tenant]?.candidate === pool }) {
            guard accepted || refusal != nil else { return .none }
            let verdict: APNsCredentialSelection.Verdict = accepted ? .proven : .refused(reason: refusal!)
            let retired = pools.withLock { pools -> Pool? in
                guard var rotation = pools.uploaded[tenant], rotation.candidate === pool else { return nil }
                let old = accepted ? rotation.active : pool
                if accepted { rotation.active = pool }
                rotation.candidate = nil
                pools.uploaded[tenant] = rotation
                return old
            }
            if let retired { Task { await retired.client.shutdown() } }
            logger.notice(
                accepted
                    ? "FCM accepted a push made with the tenant's new service account; it replaces the old one"
                    : "FCM refused the tenant's new service account; its pushes go on with the one it was to replace",
                metadata: ["tenant.id": "\(tenant)", "fcm.credential": "\(id)", "push.reason": "\(refusal ?? "")"]
            )
            if let listener = listener.withLock({ $0 }) { await listener(tenant, id, verdict) }
            return accepted ? .proven : .refusedCandidate
        }
        guard let refusal else { return .none }
        let marked = pool.failed.withLock { failed -> Bool in
            guard failed == nil else { return false }
            failed = refusal
            return true
        }
        if marked {
            logger.error(
                "FCM refused the tenant's service account; its Android pushes stop until the account is replaced",
                metadata: ["tenant.id": "\(tenant)", "push.reason": "\(refusal)"]
            )
        }
        return .failed
    }

    /// Whether an answer refuses the account itself (after the one refresh a 401 gets).
    static func credentialRefusal(_ result: PushResult) -> String? {
        guard case .refused(_, _, _, .credentialRefused(let reason)) = result else { return nil }
        return reason
    }

    /// After an expired credential: a fresh access token for the tenant. The refused one was dropped when FCM
    /// refused it (a second renewal fetches nothing more); the fetch is made here, once, rather than by each resend.
    public func renewCredentials(tenant: TenantID) async {
        guard let pool = pool(tenant: tenant) else { return }
        _ = try? await pool.tokens.token()
    }

    public func shutdown() async {
        await withTaskGroup(of: Void.self) { group in
            for client in allClients { group.addTask { await client.shutdown() } }
        }
    }

    static func refusal(_ reason: String) -> PushAnswer {
        PushAnswer(
            result: .refused(channel: .fcm, status: 0, reason: reason, outcome: .payloadRefused(alert: false)),
            latency: .zero
        )
    }
}
