import Foundation

/// Tenants and their settings.
public protocol TenantStore: Sendable {
    func createTenant(_ tenant: Tenant) async throws
    func tenant(_ id: TenantID) async throws -> Tenant?
    func tenants() async throws -> [Tenant]
    /// Changes how long APNs keeps a tenant's pushes for offline phones; unknown tenants are `.unknownTenant`.
    func setPushExpiry(tenant: TenantID, _ expiry: PushExpiry) async throws
}
