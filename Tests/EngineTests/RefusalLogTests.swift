import Foundation
import Testing

@testable import Engine

@Suite("Refusal log")
struct RefusalLogTests {
    @Test("The first refusal of a kind is logged at once, the rest once a minute with their count; an hour forgets")
    func rateLimited() throws {
        var log = RefusalLog(interval: 60, forgetAfter: 3600, kindsPerTenant: 2)
        let acme = try TenantID("acme")
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(log.note(tenant: acme, kind: "429 TooManyProviderTokenUpdates", count: 100, at: t0) == .first)
        #expect(log.note(tenant: acme, kind: "429 TooManyProviderTokenUpdates", count: 50, at: t0 + 30) == nil)
        // Another kind, and another tenant's same kind, are news of their own.
        #expect(log.note(tenant: acme, kind: "410 Unregistered", at: t0 + 31) == .first)
        #expect(log.note(tenant: try TenantID("globex"), kind: "410 Unregistered", at: t0 + 31) == .first)
        // A minute after the first line: one line for the 99 + 50 + 7 not logged yet.
        #expect(
            log.note(tenant: acme, kind: "429 TooManyProviderTokenUpdates", count: 7, at: t0 + 60)
                == .repeated(count: 156, since: 60)
        )
        #expect(log.note(tenant: acme, kind: "429 TooManyProviderTokenUpdates", at: t0 + 61) == nil)
        let recent = log.recent(tenant: acme, at: t0 + 61)
        #expect(recent.map(\.kind) == ["429 TooManyProviderTokenUpdates", "410 Unregistered"])
        #expect(recent.first?.count == 158 && recent.first?.firstAt == t0)
        // A third kind pushes out the least recent (two kinds per tenant here).
        #expect(log.note(tenant: acme, kind: "no answer: timed out", at: t0 + 62) == .first)
        #expect(log.recent(tenant: acme, at: t0 + 62).map(\.kind).contains("410 Unregistered") == false)
        // An hour without it: forgotten, and news again when it comes back.
        #expect(log.recent(tenant: acme, at: t0 + 4000).isEmpty)
        #expect(log.note(tenant: acme, kind: "429 TooManyProviderTokenUpdates", at: t0 + 4000) == .first)
    }
}
