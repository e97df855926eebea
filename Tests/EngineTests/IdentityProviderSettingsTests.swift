import Foundation
import Testing

@testable import Engine

/// A tenant's identity provider settings (issue 46, item 1): validated once for every surface, stored as JSON that
/// decodes through the same checks, and the claim rules that name a user and an admin.
@Suite("Identity provider settings")
struct IdentityProviderSettingsTests {
    @Test("An https issuer and one to ten client ids; the claims' defaults; duplicates dropped")
    func validated() throws {
        let settings = try IdentityProviderSettings(
            issuer: "https://login.microsoftonline.com/9188040d-6c67-4c5b-b112-36a304b66dad/v2.0",
            clientIDs: ["app", "console", "app"]
        )
        #expect(settings.clientIDs == ["app", "console"])
        #expect(settings.usernameClaims == ["preferred_username", "email"])
        #expect(settings.externalIDClaims == ["oid", "sub"])
        #expect(settings.localPasswords && !settings.justInTime)
        for issuer in [
            "http://login.acme.example", "https://", "https://user:pw@login.acme.example", "https://a.example/?x=1",
            "https://a.example/#f", "login.acme.example", "",
            "https://a.example/" + String(repeating: "p", count: 2048),
        ] {
            #expect(throws: EngineError.self, "\(issuer)") {
                try IdentityProviderSettings(issuer: issuer, clientIDs: ["app"])
            }
        }
        #expect(throws: EngineError.self) { try IdentityProviderSettings(issuer: "https://a.example", clientIDs: []) }
        #expect(throws: EngineError.self) {
            try IdentityProviderSettings(issuer: "https://a.example", clientIDs: (0..<11).map { "c\($0)" })
        }
        #expect(throws: EngineError.self) {
            try IdentityProviderSettings(issuer: "https://a.example", clientIDs: ["app"], usernameClaims: [])
        }
        #expect(throws: EngineError.self) {
            try IdentityProviderSettings(issuer: "https://a.example", clientIDs: ["a\nb"])
        }
        #expect(throws: EngineError.self) {
            try IdentityProviderSettings(
                issuer: "https://a.example",
                clientIDs: ["app"],
                adminClaim: .init(claim: "groups", value: "")
            )
        }
    }

    @Test("Stored JSON decodes through the same checks, missing members as the defaults")
    func decoded() throws {
        let json = #"{"issuer": "https://idp.acme.example", "clientIds": ["app"], "justInTime": true}"#
        let settings = try JSONDecoder().decode(IdentityProviderSettings.self, from: Data(json.utf8))
        #expect(settings.justInTime && settings.localPasswords && settings.usernameClaims.count == 2)
        let again = try JSONDecoder().decode(
            IdentityProviderSettings.self,
            from: try JSONEncoder().encode(settings)
        )
        #expect(again == settings)
        let bad = #"{"issuer": "http://idp.acme.example", "clientIds": ["app"]}"#
        #expect(throws: EngineError.self) {
            try JSONDecoder().decode(IdentityProviderSettings.self, from: Data(bad.utf8))
        }
    }

    @Test("The username, external id and admin role from a token's claims")
    func claims() throws {
        let settings = try IdentityProviderSettings(
            issuer: "https://idp.acme.example",
            clientIDs: ["app"],
            audiences: ["api://impulse"],
            adminClaim: .init(claim: "groups", value: "wellbeing-admins")
        )
        #expect(settings.acceptedAudiences == ["app", "api://impulse"])
        #expect(
            settings.username(strings: ["preferred_username": "ada@acme.example", "email": "x"]) == "ada@acme.example"
        )
        #expect(
            settings.username(strings: ["preferred_username": "", "email": "ada@acme.example"]) == "ada@acme.example"
        )
        #expect(settings.username(strings: ["sub": "1"]) == nil)
        #expect(settings.externalID(strings: ["sub": "s-1", "oid": "o-1"]) == "o-1")
        #expect(settings.externalID(strings: ["sub": "s-1"]) == "s-1")
        #expect(settings.grantsAdmin(strings: [:], lists: ["groups": ["staff", "wellbeing-admins"]]))
        #expect(settings.grantsAdmin(strings: ["groups": "wellbeing-admins"], lists: [:]))
        #expect(!settings.grantsAdmin(strings: [:], lists: ["groups": ["staff"], "roles": ["wellbeing-admins"]]))
        var plain = settings
        plain.adminClaim = nil
        #expect(!plain.grantsAdmin(strings: [:], lists: ["groups": ["wellbeing-admins"]]))
    }
}
