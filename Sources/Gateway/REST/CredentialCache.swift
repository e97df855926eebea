import Crypto
import Engine
import Foundation
import Synchronization

/// Recently verified credentials, so a busy client does not pay a bcrypt hash on every request.
///
/// Entries hold an HMAC of the password under a key that lives only in this process, never the password.
/// They expire after `ttl`, and are dropped at once when the user's password or enabled flag changes
/// (the change feed, or this process's own change).
final class CredentialCache: Sendable {
    struct Entry: Sendable {
        var digest: Data
        var user: User
        /// The spelling of the name that was verified: another spelling goes to the store, which alone knows
        /// whether it names this user (two names that differ only in case answer only to their exact spelling).
        var typed: String
        var expires: ContinuousClock.Instant
    }

    /// Keyed by the folded name (``UsernameMatch``): every spelling of a user's name is dropped with it.
    private struct Key: Hashable {
        var tenant: TenantID
        var username: String

        init(tenant: TenantID, username: String) {
            self.tenant = tenant
            self.username = UsernameMatch.key(username)
        }
    }

    private let key = SymmetricKey(size: .bits256)
    private let entries = Mutex([Key: Entry]())
    private let ttl: Duration
    private let capacity: Int

    init(ttl: Duration, capacity: Int = 100_000) {
        self.ttl = ttl
        self.capacity = capacity
    }

    func digest(_ password: String) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: Data(password.utf8), using: key))
    }

    /// The cached user if these exact credentials were verified recently.
    func lookup(tenant: TenantID, username: String, password: String) -> User? {
        let digest = digest(password)
        let now = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[Key(tenant: tenant, username: username)], entry.typed == username,
                entry.expires > now
            else { return nil }
            // Constant-time comparison: the digest must not leak through timing.
            guard entry.digest.count == digest.count,
                zip(entry.digest, digest).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0
            else { return nil }
            return entry.user
        }
    }

    func store(user: User, typed: String, password: String) {
        let entry = Entry(
            digest: digest(password),
            user: user,
            typed: typed,
            expires: ContinuousClock.now.advanced(by: ttl)
        )
        entries.withLock { entries in
            if entries.count >= capacity {
                let now = ContinuousClock.now
                entries = entries.filter { $0.value.expires > now }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[Key(tenant: user.tenant, username: user.username)] = entry
        }
    }

    func invalidate(tenant: TenantID, username: String) {
        _ = entries.withLock { $0.removeValue(forKey: Key(tenant: tenant, username: username)) }
    }

    func invalidate(tenant: TenantID, user: UserID) {
        entries.withLock { entries in
            for (key, entry) in entries where key.tenant == tenant && entry.user.id == user {
                entries[key] = nil
            }
        }
    }
}
