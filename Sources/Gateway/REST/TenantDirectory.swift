import Engine
import Foundation
import Synchronization

/// Tenants by id, cached: every request resolves its tenant, and tenants change rarely.
///
/// A miss reads the store (tenants are created by the admin command in another process); an unknown id is
/// remembered for a few seconds so that probing random tenant names does not become a store read each.
public final class TenantDirectory: Sendable {
    private struct State {
        var known: [String: Tenant] = [:]
        var unknown: [String: ContinuousClock.Instant] = [:]
    }

    private let store: any TenantStore
    private let state = Mutex(State())
    private let negativeTTL: Duration
    /// Serves the original, unprefixed paths.
    public let defaultTenant: TenantID?

    public init(store: any TenantStore, defaultTenant: TenantID?, negativeTTL: Duration = .seconds(5)) {
        self.store = store
        self.defaultTenant = defaultTenant
        self.negativeTTL = negativeTTL
    }

    /// Drops what is cached of a tenant (its settings changed elsewhere: an admin command, another node).
    public func forget(_ tenant: TenantID) {
        state.withLock { state in
            state.known[tenant.rawValue] = nil
            state.unknown[tenant.rawValue] = nil
        }
    }

    /// The tenant for a path segment (or the default tenant for `nil`), or a 404 problem; a suspended tenant is a
    /// 403 problem unless `allowingSuspended` (an operator's admin routes).
    func resolve(_ segment: String?, allowingSuspended: Bool = false) async throws -> Tenant {
        let tenant = try await lookup(segment)
        guard allowingSuspended || !tenant.suspended else {
            throw Problem(.forbidden, "tenant-suspended", "the programme is suspended; ask its administrator")
        }
        return tenant
    }

    private func lookup(_ segment: String?) async throws -> Tenant {
        guard let raw = segment ?? defaultTenant?.rawValue else {
            throw Problem(.notFound, "unknown-tenant", "no default tenant is configured; use /t/{tenant}/")
        }
        let now = ContinuousClock.now
        let cached: Tenant?? = state.withLock { state in
            if let expiry = state.unknown[raw], expiry > now { return .some(nil) }
            return state.known[raw].map { .some($0) } ?? nil
        }
        if let cached {
            if let tenant = cached { return tenant }
            throw Problem(.notFound, "unknown-tenant", "unknown tenant")
        }
        guard TenantID.isValid(raw), let id = try? TenantID(raw), let tenant = try await store.tenant(id) else {
            state.withLock { state in
                if state.unknown.count > 10_000 { state.unknown.removeAll() }
                state.unknown[raw] = now.advanced(by: negativeTTL)
            }
            throw Problem(.notFound, "unknown-tenant", "unknown tenant")
        }
        state.withLock { $0.known[raw] = tenant }
        return tenant
    }
}
