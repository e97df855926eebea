import Foundation

extension Administration {
    // MARK: Catalog

    /// The tenant's catalog, retired impulses included.
    public func impulses(tenant: TenantID, by actor: AdminActor) async throws -> [Impulse] {
        _ = try await self.tenant(tenant, by: actor)
        return try await store.impulses(tenant: tenant)
    }

    public func impulse(tenant: TenantID, id: ImpulseID, by actor: AdminActor) async throws -> Impulse {
        _ = try await self.tenant(tenant, by: actor)
        guard let impulse = try await store.impulse(tenant: tenant, id: id) else {
            throw EngineError(.notFound, "no impulse \(id) in \(tenant)")
        }
        return impulse
    }

    /// Creates or replaces the impulses of a catalog document (`{"items": [...]}`): all or none, each checked,
    /// every `/media/` link naming a file `mediaExists` knows.
    public func importCatalog(
        tenant: TenantID,
        _ document: Data,
        mediaExists: (String) -> Bool,
        by actor: AdminActor
    ) async throws -> (inserted: Int, updated: Int) {
        _ = try await self.tenant(tenant, by: actor)
        let impulses = try CatalogImport.parse(document, tenant: tenant)
        try CatalogImport.checkMedia(impulses, exists: mediaExists)
        return try await store.importImpulses(
            impulses,
            tenant: tenant,
            audit: AuditEntry(actor, "catalog.import", tenant: tenant, target: "catalog:\(impulses.count)", at: now())
        )
    }

    /// Creates or replaces one impulse (an item of the catalog format whose `workingID` is `id`); true when new.
    public func putImpulse(
        tenant: TenantID,
        id: ImpulseID,
        _ item: Data,
        mediaExists: (String) -> Bool,
        by actor: AdminActor
    ) async throws -> (impulse: Impulse, created: Bool) {
        _ = try await self.tenant(tenant, by: actor)
        return try await saveImpulse(try CatalogImport.parseItem(item, tenant: tenant), as: id, mediaExists, by: actor)
    }

    /// Creates or replaces one impulse from an item already read (the console's form); true when new.
    public func putImpulse(
        tenant: TenantID,
        id: ImpulseID,
        _ item: CatalogImport.Item,
        mediaExists: (String) -> Bool,
        by actor: AdminActor
    ) async throws -> (impulse: Impulse, created: Bool) {
        _ = try await self.tenant(tenant, by: actor)
        return try await saveImpulse(try CatalogImport.parseItem(item, tenant: tenant), as: id, mediaExists, by: actor)
    }

    private func saveImpulse(
        _ impulse: Impulse,
        as id: ImpulseID,
        _ mediaExists: (String) -> Bool,
        by actor: AdminActor
    ) async throws -> (impulse: Impulse, created: Bool) {
        let tenant = impulse.tenant
        guard impulse.id == id else {
            throw EngineError(.invalidInput, "the body's workingID (\(impulse.id)) is not the path's (\(id))")
        }
        try CatalogImport.checkMedia([impulse], exists: mediaExists)
        let (inserted, _) = try await store.importImpulses(
            [impulse],
            tenant: tenant,
            audit: AuditEntry(actor, "impulse.put", tenant: tenant, target: "impulse:\(id)", at: now())
        )
        return (try await self.impulse(tenant: tenant, id: id, by: actor), inserted == 1)
    }

    /// Retires an impulse (never chosen again; deliveries keep showing it) or brings it back.
    public func setRetired(tenant: TenantID, id: ImpulseID, retired: Bool, by actor: AdminActor) async throws -> Impulse
    {
        _ = try await self.tenant(tenant, by: actor)
        try await store.setImpulseRetired(
            tenant: tenant,
            impulse: id,
            retired: retired,
            audit: AuditEntry(
                actor,
                retired ? "impulse.retire" : "impulse.restore",
                tenant: tenant,
                target: "impulse:\(id)",
                at: now()
            )
        )
        return try await impulse(tenant: tenant, id: id, by: actor)
    }

    // MARK: Deliveries

    /// A page of the user's deliveries, newest first, before `before`.
    public func deliveries(
        tenant: TenantID,
        username: String,
        before: DeliveryID?,
        limit: Int,
        by actor: AdminActor
    ) async throws -> [DeliveredImpulse] {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        return try await store.deliveredImpulses(
            tenant: tenant,
            user: user.id,
            after: nil,
            before: before,
            limit: min(max(limit, 1), 500)
        )
    }

    /// Delivers an impulse to a user now (`/SendPush`'s send, the command line's `deliver`): recorded before any
    /// push, awaiting one when `awaitsPush` (the caller hands it to the push gateway).
    public func deliver(
        tenant: TenantID,
        username: String,
        impulse id: ImpulseID,
        awaitsPush: Bool,
        by actor: AdminActor
    ) async throws -> Delivery {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        _ = try await impulse(tenant: tenant, id: id, by: actor)
        let zone = try await self.tenant(tenant, by: actor).defaultTimeZone
        let assignedAt = now()
        let recorded = try await store.recordDeliveries(
            [
                NewDelivery(
                    tenant: tenant,
                    user: user.id,
                    impulse: id,
                    kind: .manual,
                    assignedAt: assignedAt,
                    awaitsPush: awaitsPush,
                    reportDay: NewDelivery.reportDay(assignedAt: assignedAt, zone: zone)
                )
            ],
            audit: AuditEntry(
                actor,
                "delivery.create",
                tenant: tenant,
                target: "user:\(username) impulse:\(id)",
                at: now()
            )
        )
        guard let delivery = recorded.first else { throw EngineError(.conflict, "the delivery was not recorded") }
        return delivery
    }
}
