import Engine

/// "Deliver now" as the admin API, `/SendPush` and the console do it: recorded by Administration (awaiting a push
/// when this node pushes), told to the ledger, and handed to the push gateway.
func deliverNow(
    _ administration: Administration,
    ledger: DeliveryLedger,
    gateway: PushGateway?,
    tenant: TenantID,
    username: String,
    impulse: ImpulseID,
    by actor: AdminActor
) async throws -> Delivery {
    let delivery = try await administration.deliver(
        tenant: tenant,
        username: username,
        impulse: impulse,
        awaitsPush: gateway != nil,
        by: actor
    )
    try await ledger.noteAssigned([delivery])
    if let gateway { await gateway.enqueue(delivery) }
    return delivery
}
