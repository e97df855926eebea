import Foundation

extension Administration {
    // MARK: Devices

    /// The tenant's devices counted per topic and environment and state (no tokens, no owners).
    public func deviceTallies(tenant: TenantID, by actor: AdminActor) async throws -> [DeviceTally] {
        _ = try await self.tenant(tenant, by: actor)
        return try await store.deviceTallies(tenant: tenant)
    }

    /// Whether `actor` may see and manage `tenant`'s APNs credentials (the rule of ``apnsCredentials(tenant:by:)``).
    public func managesAPNsCredentials(tenant: TenantID, by actor: AdminActor) async throws -> Bool {
        Self.managesAPNsCredentials(try await self.tenant(tenant, by: actor), actor)
    }
}
