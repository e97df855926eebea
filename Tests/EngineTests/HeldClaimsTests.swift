import Testing

@testable import Engine

@Suite("A node's count of the due rows it has claimed")
struct HeldClaimsTests {
    @Test("Claims count until committed or ended; a row claimed again counts once, with its new end")
    func counting() {
        var claims = HeldClaims()
        claims.claimed([1, 2, 3], until: 100)
        #expect(claims.count(at: 50) == 3)
        claims.released([2])
        #expect(claims.count(at: 50) == 2)
        // Row 3 is claimed again (its claim had not been committed) and lasts longer now.
        claims.claimed([3], until: 200)
        #expect(claims.count(at: 100) == 2)
        #expect(claims.count(at: 150) == 1)
        #expect(claims.count(at: 250) == 0)
        claims.released([1, 3])
        #expect(claims.count(at: 0) == 0)
    }
}
