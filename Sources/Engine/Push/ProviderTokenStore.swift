import Foundation

/// An APNs provider token as every node of a deployment uses it: the signed token (never the key) and when it was
/// issued.
public struct SharedProviderToken: Sendable, Equatable {
    public var token: String
    public var issuedAt: Date

    public init(token: String, issuedAt: Date) {
        self.token = token
        self.issuedAt = issuedAt
    }
}

/// Where the nodes of a deployment keep one provider token per (team, key). APNs refuses a key whose token changes
/// more often than every 20 minutes, so the deployment, not each process, must keep to one token at a time.
public protocol ProviderTokenStore: Sendable {
    /// The token the nodes use now for this team and key, if any node has stored one.
    func providerToken(teamID: String, keyID: String) async throws -> SharedProviderToken?

    /// Stores `candidate` as the token of this team and key, unless another node stored one since the caller read
    /// the one issued at `replacing` (nil: the caller saw none). Returns the token every node uses from now on: the
    /// candidate, or the other node's. A compare-and-set: of nodes refreshing at once, one token wins.
    func publishProviderToken(
        teamID: String,
        keyID: String,
        candidate: SharedProviderToken,
        replacing: Date?
    ) async throws -> SharedProviderToken
}
