import Foundation
import Testing

@testable import Gateway

/// When a tenant's provider is asked for its keys again (issue 46, item 1): its cache headers within five minutes
/// and a day, an unknown key id at most once a minute, the cached keys kept while it is unreachable.
@Suite("Identity provider key cache")
struct IdentityKeyCacheTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    let keys = JSONWebKeySet(keys: [])

    @Test("Fetched keys are used for their max-age, held to five minutes and a day; stale ones are fetched again")
    func freshness() {
        var cache = IdentityKeyCache()
        #expect(cache.action(now: start) == .fetch)
        cache.fetched(keys, maxAge: 900, now: start)
        #expect(cache.action(now: start.addingTimeInterval(899)) == .use)
        #expect(cache.action(now: start.addingTimeInterval(900)) == .fetch)
        cache.fetched(keys, maxAge: 0, now: start)
        #expect(cache.action(now: start.addingTimeInterval(299)) == .use)
        #expect(cache.action(now: start.addingTimeInterval(300)) == .fetch)
        cache.fetched(keys, maxAge: 7 * 86_400, now: start)
        #expect(cache.action(now: start.addingTimeInterval(86_399)) == .use)
        #expect(cache.action(now: start.addingTimeInterval(86_400)) == .fetch)
        cache.fetched(keys, maxAge: nil, now: start)
        #expect(cache.freshUntil == start.addingTimeInterval(IdentityKeyCache.defaultFreshness))
    }

    @Test("An unknown key id fetches at once, then not again within a minute")
    func unknownKey() {
        var cache = IdentityKeyCache()
        cache.fetched(keys, maxAge: 3600, now: start)
        #expect(cache.action(now: start, unknownKey: "k2") == .fetch)
        cache.fetching(now: start, unknownKey: "k2")
        cache.fetched(keys, maxAge: 3600, now: start)
        #expect(cache.action(now: start.addingTimeInterval(59), unknownKey: "k3") == .use)
        #expect(cache.action(now: start.addingTimeInterval(60), unknownKey: "k3") == .fetch)
    }

    @Test("An unreachable provider: cached keys keep serving, attempts back off from 5 s to 5 minutes")
    func unreachable() {
        var cache = IdentityKeyCache()
        cache.failed(now: start)
        #expect(cache.action(now: start.addingTimeInterval(4)) == .unavailable)
        #expect(cache.action(now: start.addingTimeInterval(5)) == .fetch)
        cache.fetched(keys, maxAge: 300, now: start)
        let stale = start.addingTimeInterval(400)
        #expect(cache.action(now: stale) == .fetch)
        var waited: [TimeInterval] = []
        var now = stale
        for _ in 0..<9 {
            cache.failed(now: now)
            let next = cache.retryAfter!
            waited.append(next.timeIntervalSince(now))
            #expect(cache.action(now: next.addingTimeInterval(-1)) == .use)
            #expect(cache.action(now: next.addingTimeInterval(-1), unknownKey: "k9") == .use)
            now = next
        }
        #expect(waited == [5, 10, 20, 40, 80, 160, 300, 300, 300])
        #expect(cache.action(now: now) == .fetch)
        cache.fetched(keys, maxAge: 300, now: now)
        #expect(cache.retryAfter == nil)
    }

    @Test("Cache-Control: max-age read, no-store and no-cache as 0, nothing as nil")
    func cacheControl() {
        #expect(IdentityKeyCache.maxAge(cacheControl: "public, max-age=86400, must-revalidate") == 86_400)
        #expect(IdentityKeyCache.maxAge(cacheControl: "Max-Age=\"600\"") == 600)
        #expect(IdentityKeyCache.maxAge(cacheControl: "max-age=600, no-store") == 0)
        #expect(IdentityKeyCache.maxAge(cacheControl: "no-cache") == 0)
        #expect(IdentityKeyCache.maxAge(cacheControl: "private") == nil)
        #expect(IdentityKeyCache.maxAge(cacheControl: nil) == nil)
        #expect(IdentityKeyCache.maxAge(cacheControl: "max-age=soon") == nil)
    }
}
