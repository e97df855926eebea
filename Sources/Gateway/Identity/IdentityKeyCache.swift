import Foundation

/// When a tenant's identity provider is asked for its keys again: the decisions of one tenant's key cache, with no
/// I/O (the directory that holds it fetches and reports back).
///
/// - Keys are kept as long as the provider's `Cache-Control: max-age` says, at least five minutes (a provider that
///   says `no-store` is not asked on every token) and at most a day.
/// - A token whose `kid` the cached set lacks fetches the set again at once (the provider rotated its keys), at most
///   once a minute: a stream of tokens with made-up key ids cannot make the broker hammer the provider.
/// - While the provider cannot be reached, the cached keys keep serving, stale or not; the next attempt waits a
///   backoff that doubles from five seconds to five minutes.
public struct IdentityKeyCache: Sendable {
    public static let minimumFreshness: TimeInterval = 5 * 60
    public static let maximumFreshness: TimeInterval = 24 * 3600
    /// How long keys stay fresh when the provider says nothing about it.
    public static let defaultFreshness: TimeInterval = 3600
    public static let unknownKeyInterval: TimeInterval = 60
    public static let firstBackoff: TimeInterval = 5
    public static let longestBackoff: TimeInterval = 5 * 60

    public private(set) var keys: JSONWebKeySet?
    public private(set) var freshUntil: Date = .distantPast
    /// The last fetch made for an unknown key id.
    public private(set) var lastUnknownKeyFetch: Date?
    /// After a failed fetch: no new attempt before this.
    public private(set) var retryAfter: Date?
    private var failures = 0

    public init() {}

    public enum Action: Sendable, Equatable {
        /// Verify with the cached keys.
        case use
        /// Fetch the provider's keys, then verify with what came (or, if the fetch fails, with what is cached).
        case fetch
        /// Nothing cached and the provider failed a moment ago: refuse without asking it.
        case unavailable
    }

    /// What to do for a token now; `unknownKey` is the `kid` the cached set lacked on a first try.
    public func action(now: Date, unknownKey: String? = nil) -> Action {
        let waiting = retryAfter.map { now < $0 } ?? false
        if unknownKey != nil {
            guard keys != nil else { return waiting ? .unavailable : .fetch }
            let recent = lastUnknownKeyFetch.map { now.timeIntervalSince($0) < Self.unknownKeyInterval } ?? false
            return recent || waiting ? .use : .fetch
        }
        if keys == nil { return waiting ? .unavailable : .fetch }
        return now >= freshUntil && !waiting ? .fetch : .use
    }

    /// A fetch is starting (for an unknown key id or not): counted against the once-a-minute limit.
    public mutating func fetching(now: Date, unknownKey: String?) {
        if unknownKey != nil { lastUnknownKeyFetch = now }
    }

    /// The provider answered with a key set, to be kept for `maxAge` seconds (nil: it said nothing).
    public mutating func fetched(_ keys: JSONWebKeySet, maxAge: TimeInterval?, now: Date) {
        self.keys = keys
        let freshness = min(max(maxAge ?? Self.defaultFreshness, Self.minimumFreshness), Self.maximumFreshness)
        freshUntil = now.addingTimeInterval(freshness)
        failures = 0
        retryAfter = nil
    }

    /// The provider could not be reached or answered badly: the cached keys stay, the next attempt waits.
    public mutating func failed(now: Date) {
        failures += 1
        let backoff = min(Self.firstBackoff * pow(2, Double(failures - 1)), Self.longestBackoff)
        retryAfter = now.addingTimeInterval(backoff)
    }

    /// `max-age` of a `Cache-Control` value (nil when absent; 0 for `no-store` and `no-cache`).
    public static func maxAge(cacheControl: String?) -> TimeInterval? {
        guard let cacheControl else { return nil }
        var result: TimeInterval?
        for directive in cacheControl.split(separator: ",") {
            let parts = directive.split(separator: "=", maxSplits: 1).map {
                $0.trimmingCharacters(in: .whitespaces).lowercased()
            }
            switch parts[0] {
            case "no-store", "no-cache": return 0
            case "max-age" where parts.count == 2:
                result = TimeInterval(parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
            default: continue
            }
        }
        return result
    }
}
