import Engine
import Foundation
import HTTPTypes
import HummingbirdBcrypt
import Logging
import NIOPosix
import Synchronization

/// HTTP Basic authentication against bcrypt hashes, with a short-lived cache of verified credentials.
public final class Authenticator: Sendable {
    private let store: any UserStore
    private let cache: CredentialCache
    private let realm: String
    /// Verified when the username is unknown, so that a wrong username costs as long as a wrong password: made at
    /// the cost new passwords get, on the verifier's threads when first needed (at cost 12 it takes a quarter
    /// second, which must not block whoever builds the application).
    private let decoy = Mutex<String?>(nil)
    private let bcryptCost: UInt8
    private let verifier: PasswordVerifier
    private let throttle: Mutex<LoginThrottle>
    private let failureDelay: Duration
    /// What failed logins leak away on (a test's clock moves by hand).
    private let clock: any EngineClock

    public convenience init(store: any UserStore, cacheTTL: Duration, realm: String = "Impulse Broker") {
        self.init(store: store, configuration: RESTConfiguration(credentialCacheTTL: cacheTTL), realm: realm)
    }

    public init(store: any UserStore, configuration: RESTConfiguration, realm: String = "Impulse Broker") {
        self.store = store
        self.cache = CredentialCache(ttl: configuration.credentialCacheTTL)
        self.realm = realm
        self.bcryptCost = configuration.bcryptCost
        self.verifier = PasswordVerifier(capacity: configuration.verificationQueue)
        self.throttle = Mutex(LoginThrottle(policy: configuration.loginThrottle))
        self.failureDelay = configuration.loginThrottle.failureDelay
        self.clock = configuration.clock
    }

    /// The bcrypt hash to store for a new password (run off the cooperative pool: it is deliberately slow).
    public static func hash(_ password: String, cost: UInt8) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(password, cost: cost) }
    }

    /// The stand-in hash for unknown usernames.
    func decoyHash() async throws -> String {
        if let made = decoy.withLock({ $0 }) { return made }
        let cost = bcryptCost
        let made = try await NIOThreadPool.singleton.runIfActive {
            Bcrypt.hash("decoy-\(UInt64.random(in: .min ... .max))", cost: cost)
        }
        // Two first callers may both make one; either is as good.
        return decoy.withLock { current in
            if let current { return current }
            current = made
            return made
        }
    }

    /// The enabled user behind an `Authorization: Basic` header, or a 401/403/429/503 problem. `address` is the
    /// client's (nil where it is not known, as behind a proxy): failed attempts are throttled per username and
    /// per address.
    func authenticate(_ header: String?, tenant: Tenant, address: String? = nil, logger: Logger) async throws -> User {
        guard let header, let (username, password) = Self.parseBasic(header) else {
            throw unauthorized("credentials are required")
        }
        if let user = cache.lookup(tenant: tenant.id, username: username, password: password) {
            return try enabled(user)
        }
        var logger = logger
        logger[metadataKey: "tenant.id"] = "\(tenant.id)"
        let user = try await verify(
            username: username,
            password: password,
            key: LoginThrottle.UsernameKey(tenant: tenant.id, username: username),
            address: address,
            logger: logger
        ) {
            try await store.user(tenant: tenant.id, username: username).map { ($0, $0.passwordHash) }
        }
        cache.store(user: user, typed: username, password: password)
        return try enabled(user)
    }

    /// The account `lookup` finds for `username` if `password` matches its hash, or a 401/429/503 problem. An
    /// unknown username is checked against a decoy hash, so it costs as long; failures are throttled per username
    /// (`key`) and per address, and a guesser that waits for its answers gets them slowly.
    func verify<Account: Sendable>(
        username: String,
        password: String,
        key: LoginThrottle.UsernameKey,
        address: String?,
        logger: Logger,
        lookup: () async throws -> (account: Account, hash: String)?
    ) async throws -> Account {
        let (verdict, trusted) = throttle.withLock {
            ($0.admit(key, address: address, now: clock.now), $0.isTrusted(key, address: address, now: clock.now))
        }
        guard case .proceed(let slowFailure) = verdict else {
            if case .refuse(let retryAfter) = verdict {
                logger.notice("login refused: too many failed attempts")
                throw Problem.retryLater(
                    .tooManyRequests,
                    "too-many-attempts",
                    "too many failed logins; try again later",
                    after: retryAfter
                )
            }
            throw unauthorized("wrong username or password")
        }
        let found = try await lookup()
        let valid: Bool
        do {
            // A known address of the account may use the queue's reserve: an attack elsewhere does not lock it out.
            var hash = found?.hash
            if hash == nil { hash = try await decoyHash() }
            valid = try await verifier.verify(password, hash: hash ?? "", reserved: trusted)
        } catch let overloaded as PasswordVerifier.Overloaded {
            logger.warning("login refused: the password check queue is full")
            throw Problem.retryLater(
                .serviceUnavailable,
                "overloaded",
                "the server is busy checking passwords; try again shortly",
                after: overloaded.retryAfter
            )
        }
        guard valid, let account = found?.account else {
            logger.notice("authentication failed")
            if slowFailure { try await Task.sleep(for: failureDelay) }
            throw unauthorized("wrong username or password")
        }
        throttle.withLock { $0.succeeded(key, address: address, now: clock.now) }
        return account
    }

    func invalidate(_ change: StoreChange) {
        switch change.subject {
        case .credentials(let username): cache.invalidate(tenant: change.tenant, username: username)
        case .profile(let user): cache.invalidate(tenant: change.tenant, user: user)
        case .ledger, .ledgers, .catalog, .apnsCredentials: break
        }
    }

    private func enabled(_ user: User) throws -> User {
        guard user.enabled else { throw Problem(.forbidden, "account-disabled", "this login is no longer valid") }
        return user
    }

    func unauthorized(_ detail: String) -> Problem {
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
