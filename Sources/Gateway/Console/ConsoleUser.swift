import Engine
import Foundation
import Hummingbird

/// A user's page: their settings (changed here), devices, ledger with each delivery's state and pending reminders;
/// deliver an impulse now, reset the password, disable or enable, erase, export. Administration's rules, as the
/// admin API's.
extension Console {
    func addUserRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/t/:tenant/console/users/:username") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await page(request, context, tenant: try await tenant(context)) { visit in
                try await userPage(visit, username: username)
            }
        }
        router.post("/t/:tenant/console/users/:username/settings") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, fields in
                try await changeUser(visit, username: username, fields)
            }
        }
        router.post("/t/:tenant/console/users/:username/learned-time") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, fields in
                try await userAction(visit, username: username) { tenant in
                    let optedIn = fields["optedIn"] == "true"
                    _ = try await administration.setLearnedTimeOptIn(
                        tenant: tenant,
                        username: username,
                        optedIn: optedIn,
                        by: visit.actor
                    )
                    return optedIn
                        ? "The delivery time \(username) set may now be learned."
                        : "The delivery time \(username) set is kept."
                }
            }
        }
        router.post("/t/:tenant/console/users/:username/password") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, fields in
                try await userAction(visit, username: username) { tenant in
                    try await administration.resetPassword(
                        tenant: tenant,
                        username: username,
                        password: fields["password"] ?? "",
                        by: visit.actor
                    )
                    await changed(tenant, [.credentials(username: username)])
                    return "The password of \(username) is replaced."
                }
            }
        }
        router.post("/t/:tenant/console/users/:username/deliver") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, fields in
                try await userAction(visit, username: username) { tenant in
                    let impulse = try ImpulseID(fields["impulse"] ?? "")
                    _ = try await deliverNow(
                        administration,
                        ledger: caches.ledger,
                        gateway: caches.gateway,
                        tenant: tenant,
                        username: username,
                        impulse: impulse,
                        by: visit.actor
                    )
                    return "\(impulse) is delivered to \(username)"
                        + (caches.gateway == nil ? " (this node does not push)." : " and its push is on its way.")
                }
            }
        }
    }

    func userPage(
        _ visit: Visit,
        username: String,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let (user, devices, reminders) = try await administration.userDetail(
            tenant: tenant.id,
            username: username,
            by: visit.actor
        )
        let deliveries = try await administration.deliveries(
            tenant: tenant.id,
            username: username,
            before: nil,
            limit: 50,
            by: visit.actor
        )
        let catalog = try await administration.impulses(tenant: tenant.id, by: visit.actor).filter { !$0.retired }
        let learned = try await administration.learnedTime(tenant: tenant.id, username: username, by: visit.actor)
        let zone = user.preferences.timeZone ?? tenant.defaultTimeZone
        let path = "/t/\(tenant.id)/console/users/" + Self.segment(user.username)
        let preferences = user.preferences
        let values: [String: Any] = [
            "username": user.username, "state": user.enabled ? "enabled" : "disabled", "admin": user.isAdmin,
            "created": Self.time(user.createdAt, zone: zone), "csrf": visit.session.csrfToken,
            "language": user.language ?? "", "timeZone": preferences.timeZone ?? "",
            "deliveryTime": preferences.deliveryTime?.description ?? "",
            "quietStart": preferences.quietHours?.start.description ?? "",
            "quietEnd": preferences.quietHours?.end.description ?? "",
            "defaults": "\(tenant.defaultTimeZone), \(tenant.defaultDeliveryTime)",
            "devices": devices.map { device -> [String: String] in
                [
                    "token": String(device.token.rawValue.prefix(12)) + "…", "name": device.name,
                    "environment": device.channel == .fcm ? "Android (FCM)" : device.environment.rawValue,
                    "registered": Self.time(device.registeredAt, zone: zone),
                ]
            },
            "deliveries": deliveries.map { item -> [String: String] in
                let delivery = item.delivery
                let progress =
                    delivery.readAt != nil
                    ? "read"
                    : delivery.fetchedAt != nil
                        ? "fetched" : delivery.pushedAt != nil ? "pushed" : "not pushed yet"
                // Which phones took its push: an iPhone (APNs), an Android phone (FCM), or both.
                let via = delivery.channels.channels.map { $0 == .apns ? "iPhone" : "Android" }
                let state = via.isEmpty ? progress : "\(progress) (pushed to \(via.joined(separator: " and ")))"
                return [
                    "title": item.impulse.title, "impulse": delivery.impulse.rawValue, "kind": delivery.kind.rawValue,
                    "day": delivery.localDate ?? "", "assigned": Self.time(delivery.assignedAt, zone: zone),
                    "state": state,
                ]
            },
            "reminders": reminders.map { reminder -> [String: String] in
                ["impulse": reminder.impulse.rawValue, "at": Self.time(reminder.fireAt, zone: zone)]
            },
            "impulses": catalog.map { ["id": $0.id.rawValue, "title": $0.title] },
            "settingsAction": path + "/settings", "passwordAction": path + "/password",
            "deliverAction": path + "/deliver", "enableAction": path + "/enabled",
            "toggleTo": user.enabled ? "false" : "true", "toggleLabel": user.enabled ? "Disable" : "Enable",
            "deleteAction": path + "/delete", "exportHref": path + "/export",
            "learnedSummary": learned.summary
                + (learned.ownTime
                    ? (learned.optedIn ? " (their own time, opted in)" : " (their own time, kept)") : ""),
            "learnedOwnTime": learned.ownTime, "learnedAction": path + "/learned-time",
            "learnedToggleTo": learned.optedIn ? "false" : "true",
            "learnedToggleLabel": learned.optedIn ? "Keep their own time" : "Let their own time be learned",
        ]
        return html(
            layout(
                title: user.username,
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: "/t/\(tenant.id)/console/users"),
                body: render("user", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    func changeUser(_ visit: Visit, username: String, _ fields: [String: String]) async throws -> Response {
        try await userAction(visit, username: username) { tenant in
            func given(_ name: String) -> String? { Self.given(fields, name) }
            var changes = UserChanges()
            changes.language = given("language")
            changes.timeZone = given("timeZone")
            changes.deliveryTime = try given("deliveryTime").map { (text) throws(EngineError) in
                try LocalTime(parsing: text)
            }
            changes.quietHours = try Self.quietHours(fields)
            let user = try await administration.updateUser(tenant: tenant, username: username, changes, by: visit.actor)
            await changed(tenant, [.profile(user.id)])
            return "The settings of \(username) are saved."
        }
    }

    /// Runs a change of the user's and shows their page with its outcome: a refused change with its reason.
    func userAction(
        _ visit: Visit,
        username: String,
        _ change: (TenantID) async throws -> String
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        do {
            return try await userPage(visit, username: username, notice: try await change(tenant.id))
        } catch let error as EngineError where error.code != .notFound {
            return try await userPage(visit, username: username, error: error.message, status: Problem(error).status)
        }
    }
}
