import Foundation
import Synchronization

/// Every tenant's identity provider keys, fetched when a token needs them and cached as `IdentityKeyCache` decides:
/// one fetch at a time per provider (tokens arriving during it wait for it), the cached keys kept while the provider
/// is unreachable. Keyed by tenant and issuer, so that a tenant that names another provider starts afresh and one
/// tenant's provider is never asked about another tenant's token.
public final class IdentityProviderKeys: Sendable {
    struct Entry {
        var cache = IdentityKeyCache()
        var fetch: Task<Void, Never>?
        /// Why the last fetch failed, for the refusal when nothing is cached.
        var lastFailure: String?
    }

    let fetcher: IdentityProviderFetcher
    let judged: IdentityTokenCache
    private let entries = Mutex<[String: Entry]>([:])
    /// Signature checks made (tokens judged before are not checked again).
    let signatureChecks = Atomic<Int>(0)

    public init(fetcher: IdentityProviderFetcher, judged: IdentityTokenCache = IdentityTokenCache()) {
        self.fetcher = fetcher
        self.judged = judged
    }

    /// Verifies `token` for `tenant` against its provider's keys as of `now` (fetched first when the cache says so;
    /// once more when the token's `kid` is unknown and the last such fetch is a minute old).
    public func verify(
        _ token: String,
        tenant: String,
        policy: IdentityTokenPolicy,
        now: Date
    ) async throws(IdentityTokenError) -> VerifiedIdentityToken {
        let cacheKey = IdentityTokenCache.key(token, tenant: tenant, policy: policy)
        if let verified = try judged.lookup(cacheKey, now: now) { return verified }
        let result: Result<VerifiedIdentityToken, IdentityTokenError>
        do {
            result = .success(try await check(token, tenant: tenant, policy: policy, now: now))
        } catch {
            result = .failure(error)
        }
        judged.remember(cacheKey, result, now: now)
        return try result.get()
    }

    private func check(
        _ token: String,
        tenant: String,
        policy: IdentityTokenPolicy,
        now: Date
    ) async throws(IdentityTokenError) -> VerifiedIdentityToken {
        let key = tenant + "\u{0}" + policy.issuer
        var keys = try await keySet(key, issuer: policy.issuer, now: now, unknownKey: nil)
        do {
            signatureChecks.add(1, ordering: .relaxed)
            return try IdentityToken.verify(token, keys: keys, policy: policy, now: now)
        } catch  where error.code == .unknownKey {
            keys = try await keySet(key, issuer: policy.issuer, now: now, unknownKey: Self.keyID(of: token) ?? "")
            signatureChecks.add(1, ordering: .relaxed)
            return try IdentityToken.verify(token, keys: keys, policy: policy, now: now)
        }
    }

    /// The cached keys, fetched first if the cache says so (or joining a fetch under way).
    func keySet(
        _ key: String,
        issuer: String,
        now: Date,
        unknownKey: String?
    ) async throws(IdentityTokenError)
        -> JSONWebKeySet
    {
        let fetch: Task<Void, Never>? = entries.withLock { entries in
            var entry = entries[key] ?? Entry()
            defer { entries[key] = entry }
            if let running = entry.fetch { return running }
            switch entry.cache.action(now: now, unknownKey: unknownKey) {
            case .use, .unavailable:
                return nil
            case .fetch:
                entry.cache.fetching(now: now, unknownKey: unknownKey)
                let task = Task { await self.refresh(key, issuer: issuer, now: now) }
                entry.fetch = task
                return task
            }
        }
        await fetch?.value
        let (keys, failure) = entries.withLock { ($0[key]?.cache.keys, $0[key]?.lastFailure) }
        guard let keys else {
            throw IdentityTokenError(
                .providerUnavailable,
                "the tenant's identity provider's keys cannot be had: \(failure ?? "not fetched yet")"
            )
        }
        return keys
    }

    private func refresh(_ key: String, issuer: String, now: Date) async {
        let result: Result<(JSONWebKeySet, TimeInterval?), IdentityProviderError>
        do {
            let document = try await fetcher.discover(issuer: issuer)
            let (keys, maxAge) = try await fetcher.keys(document)
            result = .success((keys, maxAge))
        } catch {
            result = .failure(error)
        }
        entries.withLock { entries in
            var entry = entries[key] ?? Entry()
            switch result {
            case .success(let (keys, maxAge)):
                entry.cache.fetched(keys, maxAge: maxAge, now: now)
                entry.lastFailure = nil
            case .failure(let error):
                entry.cache.failed(now: now)
                entry.lastFailure = error.description
            }
            entry.fetch = nil
            entries[key] = entry
        }
    }

    /// The `kid` of a token's header, read without verifying anything.
    static func keyID(of token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1).first,
            let data = ProviderJWT.decodeBase64URL(header),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        return object["kid"] as? String
    }
}
