import Engine
import Foundation

/// Resolves the tenant of a request: by its path segment, or the default tenant for the original paths.
///
/// It caches nothing of its own: tenants come from the process's one ``CatalogCache``, which also remembers, for a
/// few seconds and boundedly, names that are no tenant, so that probing made-up names does not cost a store read
/// per request. Names that cannot be a tenant id never reach the store.
public struct TenantDirectory: Sendable {
    private let catalog: CatalogCache
    /// Serves the original, unprefixed paths.
    public let defaultTenant: TenantID?

    public init(catalog: CatalogCache, defaultTenant: TenantID?) {
        self.catalog = catalog
        self.defaultTenant = defaultTenant
    }

    /// The tenant for a path segment (or the default tenant for `nil`), or a 404 problem; a suspended tenant is a
    /// 403 problem unless `allowingSuspended` (an operator's admin routes).
    func resolve(_ segment: String?, allowingSuspended: Bool = false) async throws -> Tenant {
        guard let raw = segment ?? defaultTenant?.rawValue else {
            throw Problem(.notFound, "unknown-tenant", "no default tenant is configured; use /t/{tenant}/")
        }
        guard TenantID.isValid(raw), let id = try? TenantID(raw), let tenant = try await catalog.tenant(id) else {
            throw Problem(.notFound, "unknown-tenant", "unknown tenant")
        }
        guard allowingSuspended || !tenant.suspended else {
            throw Problem(.forbidden, "tenant-suspended", "the programme is suspended; ask its administrator")
        }
        return tenant
    }
}
