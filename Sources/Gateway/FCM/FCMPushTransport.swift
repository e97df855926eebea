import Engine
import Foundation
import Logging
import NIOSSL
import Synchronization

/// The push transport on FCM HTTP v1: one connection pool and one access token per service account (a tenant's
/// own, or the broker's default for tenants without one).
///
/// - A tenant without a service account, and no default: its Android pushes are refused (`NoFCMCredential`), which
///   drops them and keeps the devices.
/// - FCM answered 401: the access token is refreshed once and the refused pushes sent again; a second 401, a 403
///   or SENDER_ID_MISMATCH marks the account failed. Its pushes are then refused at once (`FCMCredentialFailed`),
///   without reaching FCM, until the tenant's account is replaced.
public final class FCMPushTransport: PushTransport {
    public static let noCredential = "NoFCMCredential"
    public static let credentialFailed = "FCMCredentialFailed"

    struct Pool {
        let client: HTTP2PushClient
        let tokens: FCMAccessTokens
        /// Why FCM refused the account (nil: usable).
        var failed: String?
    }

    private let endpoint: PushEndpoint
    private let clientConfiguration: @Sendable (PushEndpoint) -> HTTP2PushClientConfiguration
    private let logger: Logger
    /// The tenants' own accounts' pools, and the default account's.
    private let pools = Mutex<(tenants: [TenantID: Pool], fallback: Pool?)>(([:], nil))

    public init(
        endpoint: PushEndpoint = .fcm,
        accounts: [TenantID: FCMServiceAccount] = [:],
        defaultAccount: FCMServiceAccount? = nil,
        logger: Logger,
        clientConfiguration: @escaping @Sendable (PushEndpoint) -> HTTP2PushClientConfiguration = {
            HTTP2PushClientConfiguration($0)
        }
    ) {
        self.endpoint = endpoint
        self.clientConfiguration = clientConfiguration
        self.logger = logger
        for (tenant, account) in accounts { setAccount(account, tenant: tenant) }
        if let defaultAccount {
            let pool = pool(defaultAccount)
            pools.withLock { $0.fallback = pool }
        }
    }

    /// Gives the tenant a (new) service account: its pushes use it from now on, with a fresh pool and token.
    public func setAccount(_ account: FCMServiceAccount, tenant: TenantID) {
        let pool = pool(account)
        let old = pools.withLock { pools in
            defer { pools.tenants[tenant] = pool }
            return pools.tenants[tenant]
        }
        if let old { Task { await old.client.shutdown() } }
    }

    private func pool(_ account: FCMServiceAccount) -> Pool {
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
        return Pool(client: client, tokens: tokens)
    }

    /// The pool a tenant's pushes go through: its own account's, or the default's.
    private func pool(tenant: TenantID) -> Pool? {
        pools.withLock { $0.tenants[tenant] ?? $0.fallback }
    }

    /// Why the account the tenant's pushes use was refused, if it was.
    public func failure(tenant: TenantID) -> String? {
        pool(tenant: tenant)?.failed
    }

    /// What `/inspect` shows of the pool a tenant's Android pushes use.
    public struct PoolView: Sendable {
        /// The tenant's own account (else the broker's default).
        public var own: Bool
        public var project: String
        public var client: HTTP2PushClient
        public var tokens: FCMAccessTokens
        /// Why FCM refused the account (nil: usable).
        public var failed: String?
    }

    public func poolView(tenant: TenantID) -> PoolView? {
        pools.withLock { pools in
            let own = pools.tenants[tenant]
            guard let pool = own ?? pools.fallback else { return nil }
            return PoolView(
                own: own != nil,
                project: pool.tokens.account.projectID,
                client: pool.client,
                tokens: pool.tokens,
                failed: pool.failed
            )
        }
    }

    public var allClients: [HTTP2PushClient] {
        pools.withLock { $0.tenants.values.map(\.client) + ($0.fallback.map { [$0.client] } ?? []) }
    }

    public func send(_ push: OutboundPush) async -> PushResult {
        await send(batch: [push]) { _, _ in }.first!.result
    }

    public func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        var answers = [PushAnswer?](repeating: nil, count: pushes.count)
        var groups: [TenantID: [Int]] = [:]
        let now = Date()
        for index in pushes.indices {
            let tenant = pushes[index].tenant
            switch pool(tenant: tenant) {
            case nil:
                answers[index] = Self.refusal(Self.noCredential)
                onAnswer(index, nil)
            case let pool? where pool.failed != nil:
                answers[index] = Self.refusal("\(Self.credentialFailed): \(pool.failed!)")
                onAnswer(index, nil)
            case .some:
                groups[tenant, default: []].append(index)
            }
        }
        await withTaskGroup(of: (indexes: [Int], answers: [PushAnswer]).self) { group in
            for (tenant, indexes) in groups {
                guard let pool = pool(tenant: tenant) else { continue }
                group.addTask {
                    let answers = await self.send(
                        indexes.map { pushes[$0] },
                        tenant: tenant,
                        pool: pool,
                        now: now
                    ) { position, id in onAnswer(indexes[position], id) }
                    return (indexes, answers)
                }
            }
            for await part in group {
                for (index, answer) in zip(part.indexes, part.answers) { answers[index] = answer }
            }
        }
        return answers.map { $0! }
    }

    /// One tenant's pushes through its pool; those refused with 401 are sent once more with a fresh token.
    private func send(
        _ pushes: [OutboundPush],
        tenant: TenantID,
        pool: Pool,
        now: Date,
        onAnswer: @escaping @Sendable (Int, String?) -> Void
    ) async -> [PushAnswer] {
        let project = pool.tokens.account.projectID
        let messages = pushes.map { FCMMessage($0, project: project, now: now) }
        let refusedToken = try? await pool.tokens.token()
        var answers = await pool.client.send(batch: messages) { position, id in onAnswer(position, id) }
        let unauthenticated = answers.indices.filter { answers[$0].result.refusal?.status == 401 }
        if !unauthenticated.isEmpty {
            if let refusedToken { await pool.tokens.invalidate(refusedToken) }
            let again = await pool.client.send(batch: unauthenticated.map { messages[$0] }) { position, id in
                onAnswer(unauthenticated[position], id)
            }
            for (index, answer) in zip(unauthenticated, again) { answers[index] = answer }
        }
        if let refusal = answers.lazy.compactMap({ Self.credentialRefusal($0.result) }).first {
            markFailed(tenant: tenant, client: pool.client, reason: refusal)
        }
        return answers
    }

    /// Whether an answer refuses the account itself (after the one refresh a 401 gets).
    static func credentialRefusal(_ result: PushResult) -> String? {
        guard case .refused(_, _, _, .credentialRefused(let reason)) = result else { return nil }
        return reason
    }

    private func markFailed(tenant: TenantID, client: HTTP2PushClient, reason: String) {
        let marked = pools.withLock { pools -> Bool in
            // Only the pool that was refused: an account replaced meanwhile keeps its chance.
            if let pool = pools.tenants[tenant], pool.client === client {
                guard pool.failed == nil else { return false }
                pools.tenants[tenant]?.failed = reason
                return true
            }
            guard let pool = pools.fallback, pool.client === client, pool.failed == nil else { return false }
            pools.fallback?.failed = reason
            return true
        }
        if marked {
            logger.error(
                "FCM refused the tenant's service account; its Android pushes stop until the account is replaced",
                metadata: ["tenant.id": "\(tenant)", "push.reason": "\(reason)"]
            )
        }
    }

    /// After an expired credential: a fresh access token for the tenant.
    public func renewCredentials(tenant: TenantID) async {
        guard let pool = pool(tenant: tenant), let token = try? await pool.tokens.token() else { return }
        await pool.tokens.invalidate(token)
    }

    public func shutdown() async {
        for client in allClients { await client.shutdown() }
    }

    static func refusal(_ reason: String) -> PushAnswer {
        PushAnswer(
            result: .refused(channel: .fcm, status: 0, reason: reason, outcome: .payloadRefused(alert: false)),
            latency: .zero
        )
    }
}
