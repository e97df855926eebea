import Foundation

/// Users, their credentials and their preferences (one tenant at a time).
public protocol UserStore: Sendable {
    func createUser(_ user: NewUser) async throws -> User
    /// Creates many users in one transaction (bulk onboarding): all or none.
    func createUsers(_ users: [NewUser]) async throws -> [User]
    func user(tenant: TenantID, username: String) async throws -> User?
    func user(tenant: TenantID, id: UserID) async throws -> User?
    func users(tenant: TenantID) async throws -> [User]
    /// Replaces the password hash. Returns false if there is no such user.
    func setPassword(tenant: TenantID, username: String, passwordHash: String) async throws -> Bool
    /// Enables or disables the user. Returns false if there is no such user.
    func setEnabled(tenant: TenantID, username: String, enabled: Bool) async throws -> Bool
    func setPreferences(
        tenant: TenantID,
        user: UserID,
        language: String?,
        preferences: DeliveryPreferences
    ) async throws
    func setLifeAreas(tenant: TenantID, user: UserID, scores: LifeAreaScores) async throws
}
