import Foundation
import Testing

@testable import Engine

/// A tenant's SCIM bearer token (issue 46, item 4): kept hashed, rotated with an overlap.
@Suite("SCIM provisioning tokens")
struct ProvisioningTokensTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("Issued once and kept as its hash; only that token is accepted")
    func issued() throws {
        let (token, tokens) = ProvisioningTokens.issue(now: now)
        #expect(token.hasPrefix("scim_") && token.count == 5 + 43)
        #expect(tokens.current.sha256.count == 64 && !tokens.current.sha256.contains(token))
        #expect(tokens.current.hint == String(token.prefix(9)))
        #expect(tokens.accepts(token, now: now))
        #expect(!tokens.accepts(token + "x", now: now))
        #expect(!tokens.accepts(String(token.dropFirst(5)), now: now))
        #expect(!tokens.accepts("", now: now))
        #expect(ProvisioningTokens.issue(now: now).token != token)
        // What is stored holds no token.
        let stored = String(decoding: try JSONEncoder().encode(tokens), as: UTF8.self)
        #expect(!stored.contains(String(token.dropFirst(9))))
        #expect(try JSONDecoder().decode(ProvisioningTokens.self, from: Data(stored.utf8)) == tokens)
    }

    @Test("Rotated: the old token is accepted through the overlap and not after; no overlap ends it at once")
    func rotated() throws {
        let (old, tokens) = ProvisioningTokens.issue(now: now)
        let (new, next) = try tokens.rotated(now: now, overlap: 3600)
        #expect(next.accepts(new, now: now) && next.accepts(old, now: now.addingTimeInterval(3599)))
        #expect(!next.accepts(old, now: now.addingTimeInterval(3600)))
        #expect(next.accepts(new, now: now.addingTimeInterval(86_400 * 30)))
        let (newest, last) = try next.rotated(now: now, overlap: 0)
        #expect(last.accepts(newest, now: now) && !last.accepts(new, now: now) && !last.accepts(old, now: now))
        #expect(throws: EngineError.self) { try tokens.rotated(now: now, overlap: -1) }
        #expect(throws: EngineError.self) { try tokens.rotated(now: now, overlap: 8 * 86_400) }
    }
}
