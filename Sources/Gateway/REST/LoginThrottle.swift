import Engine
import Foundation

/// Failed logins, counted per username and per client address, and what to do with the next attempt.
///
/// Each key has a score that an attempt raises by one and time lowers (one point per `leak`); a success gives its
/// point back. Attempts are charged when they are admitted, not when they fail: a flood of concurrent guesses
/// meets the limit at once instead of after all of them have been checked. Below `delayFrom`
/// an attempt goes ahead; from it, a failed attempt is answered only after `failureDelay` (slowing a guesser
/// that waits for its answers); at `limit`, attempts are refused (429) without a bcrypt check until the score
/// has fallen below the limit again. Scores are capped at `limit + burst`, so the longest refusal after an attack
/// stops is `burst + 1` leaks.
///
/// An attacker who knows a username can keep it over its limit, and people sharing an address (an office's NAT,
/// a load balancer) can push it over the address's; so that the real user is not locked out, an address that
/// logged in as that user successfully in the last `trustDuration` is refused for neither score. A pure value: the caller supplies the time and owns the lock.
struct LoginThrottle {
    struct Rule: Sendable {
        var limit: Double
        var delayFrom: Double
        var leak: Duration
        var burst: Double = 5
    }

    struct Policy: Sendable {
        var perUsername = Rule(limit: 10, delayFrom: 5, leak: .seconds(6))
        var perAddress = Rule(limit: 30, delayFrom: 10, leak: .seconds(2))
        var failureDelay: Duration = .seconds(1)
        var trustDuration: Duration = .seconds(86_400)
        /// Keys kept at most; beyond it, the ones at rest (score zero) go first, then all.
        var capacity = 100_000
    }

    enum Verdict: Equatable {
        /// Check the password; answer a failure at once, or after `failureDelay` (`slowFailure`).
        case proceed(slowFailure: Bool)
        /// Do not check: answer 429 with this Retry-After.
        case refuse(retryAfter: Duration)
    }

    /// Keyed by the folded name (``UsernameMatch``): changing the case of a name does not escape its count.
    struct UsernameKey: Hashable {
        /// The user's tenant; nil for an operator account.
        var tenant: TenantID?
        var username: String

        init(tenant: TenantID?, username: String) {
            self.tenant = tenant
            self.username = UsernameMatch.key(username)
        }
    }

    private struct Score {
        var value: Double
        var at: Date
    }

    private struct TrustKey: Hashable {
        var user: UsernameKey
        var address: String
    }

    let policy: Policy
    private var usernames: [UsernameKey: Score] = [:]
    private var addresses: [String: Score] = [:]
    private var trusted: [TrustKey: Date] = [:]

    init(policy: Policy = Policy()) {
        self.policy = policy
    }

    /// Admits an attempt for `user` from `address` (nil: not known, as behind a proxy), charging it as a failure
    /// until it succeeds; or refuses it, charging nothing.
    mutating func admit(_ user: UsernameKey, address: String?, now: Date) -> Verdict {
        let verdict = check(user, address: address, now: now)
        if case .proceed = verdict {
            prune(now: now)
            usernames[user] = Self.raised(usernames[user], by: 1, rule: policy.perUsername, now: now)
            if let address {
                addresses[address] = Self.raised(addresses[address], by: 1, rule: policy.perAddress, now: now)
            }
        }
        return verdict
    }

    /// What an attempt would get now, without charging it.
    func check(_ user: UsernameKey, address: String?, now: Date) -> Verdict {
        var wait: Duration = .zero
        var slow = false
        // A user who logged in from this address lately is let through both limits: the address may be an
        // office's NAT or a load balancer that others behind it are failing from, and the username may be under
        // attack from elsewhere. Their wrong passwords still count.
        let trustedHere = isTrusted(user, address: address, now: now)
        if let address, !trustedHere {
            let score = Self.current(addresses[address], rule: policy.perAddress, now: now)
            if score >= policy.perAddress.limit { wait = Self.until(score, below: policy.perAddress, now: now) }
            slow = slow || score >= policy.perAddress.delayFrom
        }
        let score = Self.current(usernames[user], rule: policy.perUsername, now: now)
        if score >= policy.perUsername.limit, !trustedHere {
            wait = max(wait, Self.until(score, below: policy.perUsername, now: now))
        }
        slow = slow || (score >= policy.perUsername.delayFrom && !trustedHere)
        return wait > .zero ? .refuse(retryAfter: wait) : .proceed(slowFailure: slow)
    }

    /// An admitted login succeeded: its charge is given back, and the address is trusted for this user.
    mutating func succeeded(_ user: UsernameKey, address: String?, now: Date) {
        if usernames[user] != nil {
            usernames[user] = Self.raised(usernames[user], by: -1, rule: policy.perUsername, now: now)
        }
        guard let address else { return }
        if addresses[address] != nil {
            addresses[address] = Self.raised(addresses[address], by: -1, rule: policy.perAddress, now: now)
        }
        prune(now: now)
        trusted[TrustKey(user: user, address: address)] = now.addingTimeInterval(policy.trustDuration.seconds)
    }

    /// Whether `address` is trusted for `user` (it logged in as them recently).
    func isTrusted(_ user: UsernameKey, address: String?, now: Date) -> Bool {
        guard let address, let until = trusted[TrustKey(user: user, address: address)] else { return false }
        return until > now
    }

    var keyCount: Int { usernames.count + addresses.count + trusted.count }

    // MARK: Scores

    private static func current(_ score: Score?, rule: Rule, now: Date) -> Double {
        guard let score else { return 0 }
        return max(0, score.value - now.timeIntervalSince(score.at) / rule.leak.seconds)
    }

    private static func raised(_ score: Score?, by points: Double, rule: Rule, now: Date) -> Score {
        Score(value: max(0, min(current(score, rule: rule, now: now) + points, rule.limit + rule.burst)), at: now)
    }

    /// How long until `score` falls below the rule's limit, at least one second.
    private static func until(_ score: Double, below rule: Rule, now: Date) -> Duration {
        let points = score - rule.limit + 0.001
        return max(.seconds(1), rule.leak * points)
    }

    private mutating func prune(now: Date) {
        guard keyCount >= policy.capacity else { return }
        usernames = usernames.filter { Self.current($0.value, rule: policy.perUsername, now: now) > 0 }
        addresses = addresses.filter { Self.current($0.value, rule: policy.perAddress, now: now) > 0 }
        trusted = trusted.filter { $0.value > now }
        if keyCount >= policy.capacity {
            usernames.removeAll()
            addresses.removeAll()
            trusted.removeAll()
        }
    }
}
