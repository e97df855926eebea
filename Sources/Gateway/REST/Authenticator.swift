import Engine
import Foundation
import HTTPTypes
import HummingbirdBcrypt
import Logging
import NIOPosix

/// HTTP Basic authentication against bcrypt hashes, with a short-lived cache of verified credentials.
public final class Authenticator: Sendable {
    private let store: any BrokerStore
    private let cache: CredentialCache
    private let realm: String
    /// Verified when the username is unknown, so that a wrong username costs as long as a wrong password.
    private let decoyHash: String

    public init(store: any BrokerStore, cacheTTL: Duration, realm: String = "Impulse Broker") {
        self.store = store
        self.cache = CredentialCache(ttl: cacheTTL)
        self.realm = realm
        self.decoyHash = Bcrypt.hash("decoy-\(UInt64.random(in: .min ... .max))", cost: 10)
    }

    /// The bcrypt hash to store for a new password (run off the cooperative pool: it is deliberately slow).
    public static func hash(_ password: String, cost: UInt8) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    /// The enabled user behind an `Authorization: Basic` header, or a 401/403 problem.
    func authenticate(_ header: String?, tenant: Tenant, logger: Logger) async throws -> User {
        guard let header, let (username, password) = Self.parseBasic(header) else {
            throw unauthorized("credentials are required")
        }
        if let user = cache.lookup(tenant: tenant.id, username: username, password: password) {
            return try enabled(user)
        }
        let user = try await store.user(tenant: tenant.id, username: username)
        let hash = user?.passwordHash ?? decoyHash
        let valid = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(password, hash: hash) }
        guard valid, let user else {
            logger.notice("authentication failed", metadata: ["tenant.id": "\(tenant.id)"])
            throw unauthorized("wrong username or password")
        }
        cache.store(user: user, password: password)
        return try enabled(user)
    }

    func invalidate(_ change: StoreChange) {
        switch change.subject {
        case .credentials(let username): cache.invalidate(tenant: change.tenant, username: username)
        case .profile(let user): cache.invalidate(tenant: change.tenant, user: user)
        case .ledger, .ledgers, .catalog: break
        }
    }

    private func enabled(_ user: User) throws -> User {
        guard user.enabled else { throw Problem(.forbidden, "account-disabled", "this login is no longer valid") }
        return user
    }

    private func unauthorized(_ detail: String) -> Problem {
        let quotedRealm = realm.replacingOccurrences(of: "\"", with: "")
        return Problem(
            .unauthorized,
            "unauthorized",
            detail,
            headers: [.wwwAuthenticate: "Basic realm=\"\(quotedRealm)\", charset=\"UTF-8\""]
        )
    }

    /// Splits `Basic base64(user:password)` at the first colon; both parts are UTF-8 (RFC 7617).
    static func parseBasic(_ header: String) -> (String, String)? {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let bytes = Data(base64Encoded: parts[1].trimmingCharacters(in: .whitespaces)),
            let text = String(validating: bytes, as: UTF8.self),
            let colon = text.firstIndex(of: ":")
        else { return nil }
        let username = String(text[..<colon])
        guard !username.isEmpty else { return nil }
        return (username, String(text[text.index(after: colon)...]))
    }
}
