import Foundation

/// What the push gateway reads about a batch's users.
public protocol PushTargetStore: Sendable {
    /// For a batch of deliveries about to be pushed: each user's devices and, for users with a device, the unread
    /// count, in a few statements.
    func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget]

    /// The devices each unsettled delivery was already pushed to (``Delivery/pushedDevices``), for deliveries the
    /// gateway holds without it (requeued in memory while their tenant was paused). Settled ones are left out.
    func pushedDevices(tenant: TenantID, deliveries: [DeliveryID]) async throws -> [DeliveryID: Set<String>]
}

/// What the push gateway reads: push targets, and tenants and impulses (cached).
public typealias PushGatewayStore = PushTargetStore & CatalogStore & TenantStore
