import Foundation

extension Administration {
    // MARK: Webhooks

    /// The tenant's endpoints (secrets included: the caller shows them only where it may) with their queued events.
    public func webhooks(tenant: TenantID, by actor: AdminActor) async throws -> [(WebhookEndpoint, pending: Int)] {
        _ = try await self.tenant(tenant, by: actor)
        // The endpoints (their delivered and dropped counters) first, the queue after: an event settled between
        // the two reads is then counted nowhere for a moment, never twice (as pending and as dropped).
        let endpoints = try await store.webhookEndpoints(tenant: tenant)
        let pending = try await store.pendingWebhookEvents(tenant: tenant)
        return endpoints.map { ($0, pending[$0.id] ?? 0) }
    }

    public func webhook(
        tenant: TenantID,
        id: String,
        by actor: AdminActor
    ) async throws -> (WebhookEndpoint, pending: Int) {
        guard let found = try await webhooks(tenant: tenant, by: actor).first(where: { $0.0.id == id }) else {
            throw EngineError(.notFound, "no webhook \(id.prefix(64)) in \(tenant)")
        }
        return found
    }

    /// Registers an endpoint (`url` and `events` required) with a new secret, shown in the answer only.
    public func createWebhook(
        tenant: TenantID,
        _ settings: WebhookSettings,
        policy: WebhookTargetPolicy,
        by actor: AdminActor
    ) async throws -> WebhookEndpoint {
        _ = try await self.tenant(tenant, by: actor)
        guard let url = settings.url, let events = settings.events else {
            throw EngineError(.invalidInput, "a webhook needs url and events")
        }
        guard try await store.webhookEndpoints(tenant: tenant).count < policy.maximumEndpoints else {
            throw EngineError(.conflict, "a tenant has at most \(policy.maximumEndpoints) webhooks")
        }
        let endpoint = WebhookEndpoint(
            id: "wh_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(20),
            tenant: tenant,
            url: try policy.validate(url: url),
            events: try WebhookTargetPolicy.events(events),
            secret: WebhookSignature.newSecret(),
            enabled: settings.enabled ?? true,
            createdAt: now()
        )
        try await store.createWebhookEndpoint(
            endpoint,
            audit: AuditEntry(actor, "webhook.create", tenant: tenant, target: "webhook:\(endpoint.id)", at: now())
        )
        return endpoint
    }

    /// Changes what `settings` gives.
    public func updateWebhook(
        tenant: TenantID,
        id: String,
        _ settings: WebhookSettings,
        policy: WebhookTargetPolicy,
        by actor: AdminActor
    ) async throws -> WebhookEndpoint {
        var (endpoint, _) = try await webhook(tenant: tenant, id: id, by: actor)
        if let url = settings.url { endpoint.url = try policy.validate(url: url) }
        if let events = settings.events { endpoint.events = try WebhookTargetPolicy.events(events) }
        if let enabled = settings.enabled { endpoint.enabled = enabled }
        try await save(endpoint, "webhook.update", by: actor)
        return endpoint
    }

    /// A new secret; the previous one keeps signing events (beside the new one) for a day, so a receiver can switch.
    public func rotateWebhookSecret(tenant: TenantID, id: String, by actor: AdminActor) async throws -> WebhookEndpoint
    {
        var (endpoint, _) = try await webhook(tenant: tenant, id: id, by: actor)
        endpoint.previousSecret = endpoint.secret
        endpoint.previousSecretExpiresAt = now().addingTimeInterval(86_400)
        endpoint.secret = WebhookSignature.newSecret()
        try await save(endpoint, "webhook.rotate-secret", by: actor)
        return endpoint
    }

    /// Deletes the endpoint with the events waiting for it.
    public func deleteWebhook(tenant: TenantID, id: String, by actor: AdminActor) async throws {
        _ = try await self.tenant(tenant, by: actor)
        let audit = AuditEntry(actor, "webhook.delete", tenant: tenant, target: "webhook:\(id.prefix(64))", at: now())
        guard try await store.deleteWebhookEndpoint(tenant: tenant, id: id, audit: audit) else {
            throw EngineError(.notFound, "no webhook \(id.prefix(64)) in \(tenant)")
        }
    }

    /// The endpoint's latest attempts, newest first.
    public func webhookAttempts(
        tenant: TenantID,
        id: String,
        limit: Int,
        by actor: AdminActor
    ) async throws
        -> [WebhookAttempt]
    {
        _ = try await webhook(tenant: tenant, id: id, by: actor)
        return try await store.webhookAttempts(tenant: tenant, endpoint: id, limit: min(max(limit, 1), 100))
    }

    private func save(_ endpoint: WebhookEndpoint, _ action: String, by actor: AdminActor) async throws {
        let audit = AuditEntry(actor, action, tenant: endpoint.tenant, target: "webhook:\(endpoint.id)", at: now())
        guard try await store.updateWebhookEndpoint(endpoint, audit: audit) else {
            throw EngineError(.notFound, "no webhook \(endpoint.id) in \(endpoint.tenant)")
        }
    }
}
