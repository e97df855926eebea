import Foundation

/// A tenant's impulse catalog.
public protocol CatalogStore: Sendable {
    /// Inserts or replaces impulses of one tenant in one transaction; returns how many were new.
    func importImpulses(_ impulses: [Impulse], tenant: TenantID) async throws -> (inserted: Int, updated: Int)
    func impulses(tenant: TenantID) async throws -> [Impulse]
    func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse?
}
