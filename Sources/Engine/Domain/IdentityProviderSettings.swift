import Foundation

/// A tenant's OpenID Connect provider (issue 46, item 1): who signs its staff's tokens, which clients they are
/// issued to, and how their claims name a user. One value, validated here, that the admin API, the CLI and the
/// console all set.
public struct IdentityProviderSettings: Sendable, Equatable, Codable {
    /// The provider's issuer: an https URL, compared exactly with discovery's `issuer` and tokens' `iss`.
    public var issuer: String
    /// The client ids the apps and the console use (accepted as `aud` and `azp`).
    public var clientIDs: [String]
    /// Further accepted audiences (an API the provider issues access tokens for).
    public var audiences: [String]
    /// The claims that carry the username, the first present wins.
    public var usernameClaims: [String]
    /// The claims matched with a provisioned user's SCIM `externalId`, the first present wins.
    public var externalIDClaims: [String]
    /// A user whose token has this claim holding this value (a string equal to it, or a list containing it) is a
    /// tenant admin in the console; nil: nobody is made one by a token.
    public var adminClaim: ClaimValue?
    /// Whether the tenant's users may still sign in with a local password (operators always keep theirs).
    public var localPasswords: Bool
    /// Whether a token whose subject matches no provisioned user creates one.
    public var justInTime: Bool

    public struct ClaimValue: Sendable, Equatable, Codable {
        public var claim: String
        public var value: String

        public init(claim: String, value: String) {
            self.claim = claim
            self.value = value
        }
    }

    public static let defaultUsernameClaims = ["preferred_username", "email"]
    public static let defaultExternalIDClaims = ["oid", "sub"]
    static let maximumList = 10

    public init(
        issuer: String,
        clientIDs: [String],
        audiences: [String] = [],
        usernameClaims: [String] = Self.defaultUsernameClaims,
        externalIDClaims: [String] = Self.defaultExternalIDClaims,
        adminClaim: ClaimValue? = nil,
        localPasswords: Bool = true,
        justInTime: Bool = false
    ) throws(EngineError) {
        guard issuer.utf8.count <= 2048, let url = URL(string: issuer), url.scheme?.lowercased() == "https",
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil, url.query == nil,
            url.fragment == nil
        else {
            throw EngineError(
                .invalidInput,
                "identityProvider.issuer must be an https URL without credentials, query or fragment"
            )
        }
        func names(_ list: [String], _ member: String, empty: Bool) throws(EngineError) -> [String] {
            guard empty || !list.isEmpty, list.count <= Self.maximumList,
                list.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 255 && !$0.contains(where: \.isNewline) })
            else {
                throw EngineError(
                    .invalidInput,
                    "identityProvider.\(member) must hold \(empty ? 0 : 1)-\(Self.maximumList) values of 1-255 "
                        + "characters"
                )
            }
            var seen = Set<String>()
            return list.filter { seen.insert($0).inserted }
        }
        self.issuer = issuer
        self.clientIDs = try names(clientIDs, "clientIds", empty: false)
        self.audiences = try names(audiences, "audiences", empty: true)
        self.usernameClaims = try names(usernameClaims, "usernameClaims", empty: false)
        self.externalIDClaims = try names(externalIDClaims, "externalIdClaims", empty: false)
        if let adminClaim {
            guard !adminClaim.claim.isEmpty, adminClaim.claim.utf8.count <= 255, !adminClaim.value.isEmpty,
                adminClaim.value.utf8.count <= 255
            else {
                throw EngineError(.invalidInput, "identityProvider.adminClaim needs a claim and a value of 1-255")
            }
        }
        self.adminClaim = adminClaim
        self.localPasswords = localPasswords
        self.justInTime = justInTime
    }

    enum CodingKeys: String, CodingKey {
        case issuer
        case clientIDs = "clientIds"
        case audiences, usernameClaims
        case externalIDClaims = "externalIdClaims"
        case adminClaim, localPasswords, justInTime
    }

    /// Decoded as it is set: validated, with the defaults for members left out.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            issuer: try container.decode(String.self, forKey: .issuer),
            clientIDs: try container.decode([String].self, forKey: .clientIDs),
            audiences: try container.decodeIfPresent([String].self, forKey: .audiences) ?? [],
            usernameClaims: try container.decodeIfPresent([String].self, forKey: .usernameClaims)
                ?? Self.defaultUsernameClaims,
            externalIDClaims: try container.decodeIfPresent([String].self, forKey: .externalIDClaims)
                ?? Self.defaultExternalIDClaims,
            adminClaim: try container.decodeIfPresent(ClaimValue.self, forKey: .adminClaim),
            localPasswords: try container.decodeIfPresent(Bool.self, forKey: .localPasswords) ?? true,
            justInTime: try container.decodeIfPresent(Bool.self, forKey: .justInTime) ?? false
        )
    }

    /// Every audience a token may carry: the clients' ids and the further audiences.
    public var acceptedAudiences: Set<String> { Set(clientIDs).union(audiences) }

    /// The username a token's claims give (the first of `usernameClaims` present and not empty).
    public func username(strings: [String: String]) -> String? {
        usernameClaims.lazy.compactMap { strings[$0] }.first { !$0.isEmpty }
    }

    /// The value matched with a provisioned user's `externalId`.
    public func externalID(strings: [String: String]) -> String? {
        externalIDClaims.lazy.compactMap { strings[$0] }.first { !$0.isEmpty }
    }

    /// Whether the claims make the user a tenant admin.
    public func grantsAdmin(strings: [String: String], lists: [String: [String]]) -> Bool {
        guard let adminClaim else { return false }
        return strings[adminClaim.claim] == adminClaim.value
            || (lists[adminClaim.claim]?.contains(adminClaim.value) ?? false)
    }
}
