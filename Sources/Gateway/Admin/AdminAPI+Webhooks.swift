import Engine
import Foundation
import HTTPTypes
import Hummingbird

/// A webhook endpoint as the admin API shows it: the secret only in the answer that made it (creation, rotation).
struct WebhookBody: Encodable, Sendable {
    var id: String
    var url: String
    var events: [String]
    var enabled: Bool
    var createdAt: String
    var secret: String?
    var previousSecretExpiresAt: String?
    var pending: Int
    var delivered: Int
    var dropped: Int
    var lastAttemptAt: String?
    var lastStatus: Int?
    var lastError: String?

    init(_ endpoint: WebhookEndpoint, pending: Int, showingSecret: Bool = false) {
        id = endpoint.id
        url = endpoint.url
        events = endpoint.events.sorted().map(\.rawValue)
        enabled = endpoint.enabled
        createdAt = rfc3339(endpoint.createdAt)
        secret = showingSecret ? endpoint.secret : nil
        previousSecretExpiresAt = endpoint.previousSecretExpiresAt.map(rfc3339)
        self.pending = pending
        delivered = endpoint.delivered
        dropped = endpoint.dropped
        lastAttemptAt = endpoint.lastAttemptAt.map(rfc3339)
        lastStatus = endpoint.lastStatus
        lastError = endpoint.lastError
    }
}

/// `POST` and `PATCH` bodies.
struct WebhookSettingsBody: Decodable {
    var url: String?
    var events: [String]?
    var enabled: Bool?

    var settings: WebhookSettings { WebhookSettings(url: url, events: events, enabled: enabled) }
}

struct WebhookAttemptBody: Encodable, Sendable {
    var eventID: String
    var event: String
    var at: String
    var outcome: String
    var status: Int?
    var error: String?
    var durationMilliseconds: Int

    init(_ attempt: WebhookAttempt) {
        eventID = "evt_\(attempt.eventID)"
        event = attempt.event.rawValue
        at = rfc3339(attempt.at)
        outcome = attempt.outcome
        status = attempt.status
        error = attempt.error
        durationMilliseconds = Int((attempt.durationSeconds * 1000).rounded())
    }
}

extension AdminAPI {
    /// A tenant's webhook endpoints: register, list, change, rotate the secret, delete, and the latest attempts.
    func addWebhookRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        let policy = webhooks
        tenantResource(
            router,
            "/webhooks",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    let endpoints = try await administration.webhooks(tenant: tenant.id, by: actor)
                    return try Representation.response(
                        PageBody(items: endpoints.map { WebhookBody($0.0, pending: $0.pending) }, next: nil),
                        for: request
                    )
                },
                .post: { request, _, actor, tenant in
                    let body = try await Self.decode(
                        api,
                        WebhookSettingsBody.self,
                        schema: "WebhookSettings",
                        from: request
                    )
                    let endpoint = try await administration.createWebhook(
                        tenant: tenant.id,
                        body.settings,
                        policy: policy,
                        by: actor
                    )
                    var response = try Representation.response(
                        WebhookBody(endpoint, pending: 0, showingSecret: true),
                        for: request,
                        status: .created
                    )
                    response.headers[.location] = "/t/\(tenant.id)/admin/v1/webhooks/\(endpoint.id)"
                    response.headers[.cacheControl] = "no-store"
                    return response
                },
            ]
        )
        tenantResource(
            router,
            "/webhooks/:webhook",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let (endpoint, pending) = try await administration.webhook(
                        tenant: tenant.id,
                        id: try Self.parameter("webhook", context),
                        by: actor
                    )
                    return try Representation.response(WebhookBody(endpoint, pending: pending), for: request)
                },
                .patch: { request, context, actor, tenant in
                    let body = try await Self.decode(
                        api,
                        WebhookSettingsBody.self,
                        schema: "WebhookSettings",
                        from: request
                    )
                    let id = try Self.parameter("webhook", context)
                    _ = try await administration.updateWebhook(
                        tenant: tenant.id,
                        id: id,
                        body.settings,
                        policy: policy,
                        by: actor
                    )
                    let (endpoint, pending) = try await administration.webhook(tenant: tenant.id, id: id, by: actor)
                    return try Representation.response(WebhookBody(endpoint, pending: pending), for: request)
                },
                .delete: { _, context, actor, tenant in
                    try await administration.deleteWebhook(
                        tenant: tenant.id,
                        id: try Self.parameter("webhook", context),
                        by: actor
                    )
                    return Response(status: .noContent)
                },
            ]
        )
        tenantResource(
            router,
            "/webhooks/:webhook/secret",
            api: api,
            scheme: scheme,
            [
                .post: { request, context, actor, tenant in
                    let id = try Self.parameter("webhook", context)
                    let endpoint = try await administration.rotateWebhookSecret(tenant: tenant.id, id: id, by: actor)
                    let pending = try await administration.webhook(tenant: tenant.id, id: id, by: actor).pending
                    var response = try Representation.response(
                        WebhookBody(endpoint, pending: pending, showingSecret: true),
                        for: request
                    )
                    response.headers[.cacheControl] = "no-store"
                    return response
                }
            ]
        )
        tenantResource(
            router,
            "/webhooks/:webhook/attempts",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let limit = Int(try api.integer("limit", in: request, default: 50, range: 1...500) ?? 50)
                    let attempts = try await administration.webhookAttempts(
                        tenant: tenant.id,
                        id: try Self.parameter("webhook", context),
                        limit: limit,
                        by: actor
                    )
                    return try Representation.response(
                        PageBody(items: attempts.map(WebhookAttemptBody.init), next: nil),
                        for: request
                    )
                }
            ]
        )
    }
}
