import Engine
import Foundation
import Hummingbird

/// The tenant's settings page: its programme (language, time zone, delivery time, quiet hours, weekdays, pushes
/// per day, push expiry, when new users start, learned delivery times), changed by its admins and operators on Administration's rules.
extension Console {
    func addSettingsRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/t/:tenant/console/settings") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in try await settingsPage(visit)
            }
        }
        router.post("/t/:tenant/console/settings") { request, context in
            try await form(request, context) { visit, fields in try await changeSettings(visit, fields) }
        }
    }

    func settingsPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok,
        typed: [String: String]? = nil
    ) async throws -> Response {
        let shown = try requireTenant(visit)
        let tenant = try await administration.tenant(shown.id, by: visit.actor)
        let base = "/t/\(tenant.id)/console/settings"
        let current: [String: String] = [
            "language": tenant.defaultLanguage, "timeZone": tenant.defaultTimeZone,
            "deliveryTime": tenant.defaultDeliveryTime.description,
            "quietStart": tenant.defaultQuietHours?.start.description ?? "",
            "quietEnd": tenant.defaultQuietHours?.end.description ?? "",
            "maxPushesPerDay": "\(tenant.maxPushesPerDay)", "pushExpiry": tenant.pushExpiry.rawValue,
            "firstDelivery": tenant.firstDelivery.rawValue,
            "learnedEnabled": tenant.learnedTiming.enabled ? "on" : "",
            "learnedWindow": "\(tenant.learnedTiming.windowMinutes)",
            "learnedHoldout": (tenant.learnedTiming.holdoutShare * 100).formatted(.number.grouping(.never)),
        ]
        let values = typed ?? current
        let days = typed.map { fields in (1...7).filter { fields["weekday.\($0)"] == "on" } } ?? tenant.weekdays.days
        let names = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
        func options(_ field: String, _ choices: [(String, String)]) -> [[String: Any]] {
            choices.map { ["value": $0.0, "label": $0.1, "selected": values[field] == $0.0] }
        }
        let page: [String: Any] = [
            "action": base, "csrf": visit.session.csrfToken,
            "language": values["language"] ?? "", "timeZone": values["timeZone"] ?? "",
            "deliveryTime": values["deliveryTime"] ?? "", "quietStart": values["quietStart"] ?? "",
            "quietEnd": values["quietEnd"] ?? "", "maxPushesPerDay": values["maxPushesPerDay"] ?? "",
            "learnedEnabled": values["learnedEnabled"] == "on", "learnedWindow": values["learnedWindow"] ?? "",
            "learnedHoldout": values["learnedHoldout"] ?? "",
            "learnedFallback": tenant.learnedTiming.fallback.map {
                [["since": $0.since.description, "reason": $0.reason]]
            }
                ?? [],
            "weekdays": (1...7).map { day -> [String: Any] in
                [
                    "field": "weekday.\(day)", "id": "weekday-\(day)", "name": names[day - 1],
                    "checked": days.contains(day),
                ]
            },
            "pushExpiry": options(
                "pushExpiry",
                [("end-of-day", "until the end of the user's day"), ("immediate", "once (apns-expiration 0)")]
            ),
            "firstDelivery": options(
                "firstDelivery",
                [
                    ("next-delivery-time", "at their next delivery time"),
                    ("immediate", "with today's impulse at once (a welcome)"),
                ]
            ),
        ]
        return html(
            layout(
                title: "Settings",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("settings", page),
                notice: notice,
                error: error
            ),
            status
        )
    }

    func changeSettings(_ visit: Visit, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        func given(_ name: String) -> String? { Self.given(fields, name) }
        do {
            // Both ends empty removes the quiet hours (a window whose start is its end).
            let quiet = try Self.quietHours(fields) ?? QuietHours(parsing: "00:00-00:00")
            let maximum = try given("maxPushesPerDay").map { (text) throws(EngineError) -> Int in
                guard let value = Int(text) else { throw EngineError(.invalidInput, "pushes per day must be a number") }
                return value
            }
            let window = try given("learnedWindow").map { (text) throws(EngineError) -> Int in
                guard let value = Int(text) else {
                    throw EngineError(.invalidInput, "the window must be whole minutes")
                }
                return value
            }
            let holdout = try given("learnedHoldout").map { (text) throws(EngineError) -> Double in
                guard let value = Double(text) else { throw EngineError(.invalidInput, "the holdout must be a number") }
                return value / 100
            }
            let settings = TenantSettings(
                defaultLanguage: given("language"),
                defaultTimeZone: given("timeZone"),
                deliveryTime: given("deliveryTime"),
                maxPushesPerDay: maximum,
                quietHours: quiet,
                weekdays: (1...7).filter { fields["weekday.\($0)"] == "on" },
                pushExpiry: given("pushExpiry"),
                firstDelivery: given("firstDelivery"),
                learnedTiming: LearnedTimingChanges(
                    enabled: fields["learnedEnabled"] == "on",
                    windowMinutes: window,
                    holdoutShare: holdout,
                    resume: fields["learnedResume"] == "on" ? true : nil
                )
            )
            let updated = try await administration.updateTenant(tenant.id, settings, by: visit.actor)
            await changed(updated.id, [.catalog])
            return try await settingsPage(visit, notice: "The settings are saved.")
        } catch let error as EngineError {
            return try await settingsPage(visit, error: error.message, status: Problem(error).status, typed: fields)
        }
    }

    /// A form field as typed, trimmed; nil when empty.
    static func given(_ fields: [String: String], _ name: String) -> String? {
        fields[name].map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The quiet hours of a form's `quietStart` and `quietEnd`; nil when both are empty.
    static func quietHours(_ fields: [String: String]) throws(EngineError) -> QuietHours? {
        let start = given(fields, "quietStart")
        let end = given(fields, "quietEnd")
        guard (start == nil) == (end == nil) else {
            throw EngineError(.invalidInput, "give both ends of the quiet hours, or neither")
        }
        guard let start, let end else { return nil }
        return try QuietHours(parsing: "\(start)-\(end)")
    }
}
