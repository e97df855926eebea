import Engine
import Foundation
import Hummingbird

/// The webhooks page: endpoints with their queue and latest attempts; register one, turn it off and on, rotate its
/// secret, delete it, on the admin API's rules. A new secret is shown once, on the page that answers its form.
extension Console {
    func addWebhooksRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/t/:tenant/console/webhooks") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in try await webhooksPage(visit)
            }
        }
        router.post("/t/:tenant/console/webhooks") { request, context in
            try await form(request, context) { visit, fields in try await createWebhook(visit, fields) }
        }
        router.post("/t/:tenant/console/webhooks/:id/enabled") { request, context in
            let id = try AdminAPI.parameter("id", context)
            return try await form(request, context) { visit, fields in
                try await changeWebhook(visit, id: id) { tenant in
                    let endpoint = try await administration.updateWebhook(
                        tenant: tenant,
                        id: id,
                        WebhookSettings(enabled: fields["enabled"] == "true"),
                        policy: webhookPolicy,
                        by: visit.actor
                    )
                    return "\(endpoint.url) is \(endpoint.enabled ? "on" : "off")."
                }
            }
        }
        router.post("/t/:tenant/console/webhooks/:id/secret") { request, context in
            let id = try AdminAPI.parameter("id", context)
            return try await form(request, context) { visit, _ in
                try await changeWebhook(visit, id: id) { tenant in
                    let endpoint = try await administration.rotateWebhookSecret(tenant: tenant, id: id, by: visit.actor)
                    return "The new signing secret of \(endpoint.url) is \(endpoint.secret) (shown once); the old one "
                        + "signs beside it for a day."
                }
            }
        }
        router.post("/t/:tenant/console/webhooks/:id/delete") { request, context in
            let id = try AdminAPI.parameter("id", context)
            return try await form(request, context) { visit, _ in
                try await changeWebhook(visit, id: id) { tenant in
                    try await administration.deleteWebhook(tenant: tenant, id: id, by: visit.actor)
                    return "The webhook is deleted, with the events waiting for it."
                }
            }
        }
    }

    func webhooksPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok,
        typed: [String: String] = [:]
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let base = "/t/\(tenant.id)/console/webhooks"
        let csrf = visit.session.csrfToken
        var endpoints: [[String: Any]] = []
        for (endpoint, pending) in try await administration.webhooks(tenant: tenant.id, by: visit.actor) {
            let attempts = try await administration.webhookAttempts(
                tenant: tenant.id,
                id: endpoint.id,
                limit: 5,
                by: visit.actor
            )
            let path = base + "/" + Self.segment(endpoint.id)
            endpoints.append([
                "id": endpoint.id, "url": endpoint.url,
                "events": endpoint.events.sorted().map(\.rawValue).joined(separator: ", "),
                "state": endpoint.enabled ? "on" : "off", "pending": "\(pending)",
                "delivered": "\(endpoint.delivered)", "dropped": "\(endpoint.dropped)",
                "last": endpoint.lastAttemptAt.map {
                    Self.time($0, zone: tenant.defaultTimeZone) + (endpoint.lastError.map { ": \($0)" } ?? "")
                } ?? "never",
                "attempts": attempts.map { attempt -> [String: String] in
                    [
                        "at": Self.time(attempt.at, zone: tenant.defaultTimeZone), "event": attempt.event.rawValue,
                        "outcome": attempt.outcome,
                        "detail": [attempt.status.map { "HTTP \($0)" }, attempt.error].compactMap { $0 }
                            .joined(separator: ", "),
                    ]
                },
                "csrf": csrf, "enabledAction": path + "/enabled", "toggleTo": endpoint.enabled ? "false" : "true",
                "toggleLabel": endpoint.enabled ? "Turn off" : "Turn on", "secretAction": path + "/secret",
                "deleteAction": path + "/delete",
            ])
        }
        let values: [String: Any] = [
            "endpoints": endpoints, "csrf": csrf, "createAction": base, "url": typed["url"] ?? "",
            "events": WebhookEvent.allCases.map { event -> [String: Any] in
                [
                    "name": event.rawValue, "field": "event." + event.rawValue,
                    "id": "event-" + event.rawValue.replacingOccurrences(of: ".", with: "-"),
                    "checked": typed.isEmpty || typed["event." + event.rawValue] == "on",
                ]
            },
        ]
        return html(
            layout(
                title: "Webhooks",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("webhooks", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    func createWebhook(_ visit: Visit, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        let events = WebhookEvent.allCases.map(\.rawValue).filter { fields["event." + $0] == "on" }
        do {
            let endpoint = try await administration.createWebhook(
                tenant: tenant.id,
                WebhookSettings(url: fields["url"] ?? "", events: events),
                policy: webhookPolicy,
                by: visit.actor
            )
            return try await webhooksPage(
                visit,
                notice: "\(endpoint.url) is registered. Its signing secret is \(endpoint.secret) (shown once: keep "
                    + "it where the receiver checks signatures).",
                status: .created
            )
        } catch let error as EngineError {
            return try await webhooksPage(visit, error: error.message, status: Problem(error).status, typed: fields)
        }
    }

    func changeWebhook(_ visit: Visit, id: String, _ change: (TenantID) async throws -> String) async throws -> Response
    {
        let tenant = try requireTenant(visit)
        do {
            return try await webhooksPage(visit, notice: try await change(tenant.id))
        } catch let error as EngineError {
            return try await webhooksPage(visit, error: error.message, status: Problem(error).status)
        }
    }
}
