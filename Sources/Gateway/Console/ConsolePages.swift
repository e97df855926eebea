import Engine
import Foundation
import Hummingbird
import NIOCore

/// The console's pages: each reads and writes through ``Administration``, as the admin API does.
extension Console {
    // MARK: Today and the report

    func dashboard(_ visit: Visit) async throws -> Response {
        let tenant = try requireTenant(visit)
        let report = try await administration.engagementReport(tenant: tenant.id, from: nil, to: nil, by: visit.actor)
        let today = report.days.last
        let counts = today?.counts ?? EngagementCounts()
        let dispatch = today?.dispatch ?? DispatchCounts()
        let cards: [[String: String]] = [
            ["label": "due today", "value": "\(dispatch.due)"],
            ["label": "assigned", "value": "\(counts.assigned)"],
            ["label": "pushed", "value": "\(counts.pushed)"],
            ["label": "without a device", "value": "\(counts.noDevice)"],
            ["label": "failed", "value": "\(counts.failed)"],
            ["label": "read", "value": "\(counts.read)"],
            ["label": "read rate", "value": Self.percent(counts.readRate)],
            ["label": "skipped (weekdays)", "value": "\(dispatch.skippedWeekday)"],
        ]
        let base = "/t/\(tenant.id)/console"
        var values: [String: Any] = [
            "today": report.range.through.description, "zone": tenant.defaultTimeZone,
            "updated": Self.time(Date(), zone: tenant.defaultTimeZone), "cards": cards,
            "chart": ConsoleChart.svg(report.days, title: "Deliveries assigned and read per day, last 30 days"),
            "reportHref": base + "/report",
            "due": "\(dispatch.due)", "assigned": "\(counts.assigned)", "pushed": "\(counts.pushed)",
            "settled": "\(counts.pushed + counts.noDevice + counts.failed)", "noDevice": "\(counts.noDevice)",
            "failed": "\(counts.failed)", "pushedMax": "\(max(counts.assigned, 1))",
        ]
        // One look at this node: operators see the shared scheduler too.
        let view = try await inspector.view(tenant: visit.actor.role == .operator ? nil : tenant.id)
        values["alerts"] = Self.liveAlerts(view, tenant: tenant.id)
        if let own = view.tenants.first(where: { $0.tenant == tenant.id.rawValue }) {
            values["queued"] = "\(own.queued)"
        }
        let body = render("dashboard", values)
        return html(
            layout(
                title: "Today",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: body,
                refresh: 30
            )
        )
    }

    /// What is wrong with today's dispatch right now, as this node sees it: the tenant's pushes paused or APNs
    /// unreachable; in an operator's view (which has the scheduler) also the shared scheduler failing or late.
    static func liveAlerts(_ view: Inspector.View, tenant: TenantID) -> [String] {
        var alerts: [String] = []
        if let own = view.tenants.first(where: { $0.tenant == tenant.rawValue }) {
            if let paused = own.configurationError { alerts.append("Pushes are paused: \(paused)") }
            for pool in own.apns {
                if let unreachable = pool.unreachable {
                    alerts.append(
                        "APNs (\(pool.environment)) has been unreachable for "
                            + "\(Self.duration(Double(unreachable.forSeconds))): \(unreachable.lastError ?? "no answer")"
                    )
                }
            }
        }
        if let scheduler = view.scheduler {
            if let failing = scheduler.failing {
                alerts.append(
                    "The scheduler is failing (\(failing.consecutiveFailures) times in a row): "
                        + (failing.lastError ?? "unknown error")
                )
            }
            if scheduler.lagSeconds > 60 {
                alerts.append("The scheduler is \(Self.duration(scheduler.lagSeconds)) behind its due users.")
            }
        }
        return alerts
    }

    func reportPage(_ visit: Visit, _ request: Request) async throws -> Response {
        let tenant = try requireTenant(visit)
        let from = request.uri.queryParameters["from"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
        let to = request.uri.queryParameters["to"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
        let report = try await administration.engagementReport(tenant: tenant.id, from: from, to: to, by: visit.actor)
        let range = "from=\(report.range.from)&to=\(report.range.through)"
        let api = "/t/\(tenant.id)/console/report/"
        let total = report.total
        let body = render(
            "report",
            [
                "action": "/t/\(tenant.id)/console/report", "from": report.range.from.description,
                "to": report.range.through.description,
                "csv": EngagementReport.Table.allCases.map {
                    ["href": api + "\($0.rawValue).csv?" + range, "label": "\($0.rawValue).csv"]
                },
                "cards": [
                    ["label": "assigned", "value": "\(total.assigned)"],
                    ["label": "pushed", "value": "\(total.pushed)"],
                    ["label": "read", "value": "\(total.read)"],
                    ["label": "read rate", "value": Self.percent(total.readRate)],
                    ["label": "median to read", "value": Self.duration(total.medianSecondsToRead)],
                ],
                "channels": report.channels.map { row -> [String: String] in
                    [
                        "channel": row.channel == .apns ? "APNs (iPhone)" : "FCM (Android)",
                        "pushed": "\(row.counts.pushed)", "read": "\(row.counts.read)",
                        "readRate": Self.percent(row.counts.readRate),
                    ]
                },
                "hasTiming": !report.timing.isEmpty,
                "timingSummary": report.timingOverall?.plainSummary ?? "",
                "timing":
                    (report.timing.map { ($0.weekStart.description, $0) }
                    + (report.timingOverall.map { [("whole range", $0)] } ?? [])).map {
                        label,
                        week -> [String: String] in
                        let users = week.users
                        return [
                            "week": label,
                            "learnedUsers": "\(users.learned.users)",
                            "learnedDeliveries": "\(users.learned.deliveries)",
                            "learnedWithinHour": Self.percent(users.learned.withinHourRate),
                            "learnedRead": Self.percent(users.learned.readRate),
                            "learnedMedian": Self.duration(week.learned.medianSecondsToRead),
                            "holdoutUsers": "\(users.holdout.users)",
                            "holdoutDeliveries": "\(users.holdout.deliveries)",
                            "holdoutWithinHour": Self.percent(users.holdout.withinHourRate),
                            "holdoutRead": Self.percent(users.holdout.readRate),
                            "holdoutMedian": Self.duration(week.holdout.medianSecondsToRead),
                            "withinHourDifference": users.withinHour?.points ?? "–",
                            "readDifference": users.read?.points ?? "–",
                        ]
                    },
                "chart": ConsoleChart.svg(
                    report.days,
                    title: "Deliveries assigned and read per day, \(report.range.from) to \(report.range.through)"
                ),
                "days": report.days.reversed().map { day -> [String: String] in
                    [
                        "day": day.day.description, "active": "\(day.dispatch.active)", "due": "\(day.dispatch.due)",
                        "assigned": "\(day.counts.assigned)", "pushed": "\(day.counts.pushed)",
                        "noDevice": "\(day.counts.noDevice)", "failed": "\(day.counts.failed)",
                        "read": "\(day.counts.read)", "readRate": Self.percent(day.counts.readRate),
                        "median": Self.duration(day.counts.medianSecondsToRead),
                    ]
                },
                "impulses": report.impulses.map { row -> [String: String] in
                    [
                        "id": row.impulse.rawValue, "title": row.title ?? "(no longer in the catalog)",
                        "area": row.lifeArea?.rawValue ?? "", "assigned": "\(row.counts.assigned)",
                        "pushed": "\(row.counts.pushed)", "read": "\(row.counts.read)",
                        "readRate": Self.percent(row.counts.readRate),
                    ]
                },
                "areas": report.lifeAreas.map { row -> [String: String] in
                    [
                        "area": row.lifeArea?.rawValue ?? "(unknown)", "assigned": "\(row.counts.assigned)",
                        "read": "\(row.counts.read)", "readRate": Self.percent(row.counts.readRate),
                    ]
                },
            ] as [String: Any]
        )
        let current = "/t/\(tenant.id)/console/report"
        return html(
            layout(
                title: "Engagement report",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: current),
                body: body
            )
        )
    }

    /// One of the report's tables as CSV, as the admin API's.
    func reportCSV(_ visit: Visit, _ request: Request, file: String) async throws -> Response {
        let tenant = try requireTenant(visit)
        let table = try EngagementReport.Table(file: file)
        let report = try await administration.engagementReport(
            tenant: tenant.id,
            from: request.uri.queryParameters["from"].map(String.init),
            to: request.uri.queryParameters["to"].map(String.init),
            by: visit.actor
        )
        return AdminAPI.csvResponse(report, table: table, tenant: tenant.id, headers: Self.securityHeaders)
    }

    // MARK: Users

    func usersPage(
        _ visit: Visit,
        _ request: Request,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let search = request.uri.queryParameters["search"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
        let after = request.uri.queryParameters["after"].map(String.init)
        let limit = 50
        let users = try await administration.users(
            tenant: tenant.id,
            search: search,
            after: after,
            limit: limit + 1,
            by: visit.actor
        )
        let base = "/t/\(tenant.id)/console/users"
        let csrf = visit.session.csrfToken
        let shown = users.prefix(limit).map { user -> [String: String] in
            let path = base + "/" + Self.segment(user.username)
            return [
                "username": user.username, "state": user.enabled ? "enabled" : "disabled",
                "admin": user.isAdmin ? "yes" : "", "created": Self.time(user.createdAt, zone: tenant.defaultTimeZone),
                "enableAction": path + "/enabled", "toggleTo": user.enabled ? "false" : "true",
                "toggleLabel": user.enabled ? "Disable" : "Enable", "deleteAction": path + "/delete", "csrf": csrf,
                "exportHref": path + "/export", "pageHref": path,
            ]
        }
        var values: [String: Any] = [
            "action": base, "search": search ?? "", "users": Array(shown), "csrf": csrf, "createAction": base,
            "importAction": base + "/import",
        ]
        if users.count > limit, let last = shown.last?["username"] {
            var components = URLComponents()
            components.path = base
            components.queryItems =
                [URLQueryItem(name: "after", value: last)]
                + (search.map { [URLQueryItem(name: "search", value: $0)] } ?? [])
            values["next"] = components.string ?? base
        }
        return html(
            layout(
                title: "Users",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("users", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    func createUser(_ visit: Visit, _ fields: [String: String], _ request: Request) async throws -> Response {
        let tenant = try requireTenant(visit)
        var settings = UserChanges()
        if let zone = fields["timeZone"], !zone.isEmpty { settings.timeZone = zone }
        let draft = UserDraft(
            username: fields["username"] ?? "",
            password: fields["password"] ?? "",
            settings: settings
        )
        do {
            let user = try await administration.createUser(tenant: tenant.id, draft, by: visit.actor)
            return redirect("/t/\(tenant.id)/console/users?search=\(Self.query(user.username))")
        } catch let error as EngineError {
            return try await usersPage(visit, request, error: error.message, status: Problem(error).status)
        }
    }

    func setEnabled(_ visit: Visit, username: String, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        var changes = UserChanges()
        changes.enabled = fields["enabled"] == "true"
        let user = try await administration.updateUser(tenant: tenant.id, username: username, changes, by: visit.actor)
        await changed(tenant.id, [.credentials(username: username), .profile(user.id)])
        return redirect("/t/\(tenant.id)/console/users?search=\(Self.query(username))")
    }

    func deleteUser(_ visit: Visit, username: String) async throws -> Response {
        let tenant = try requireTenant(visit)
        let user = try await administration.user(tenant: tenant.id, username: username, by: visit.actor)
        let report = try await administration.deleteUser(tenant: tenant.id, username: username, by: visit.actor)
        await changed(tenant.id, [.credentials(username: username), .ledger(user.id)])
        return message(
            visit,
            title: "User deleted",
            text: "\(username) is deleted, with \(report.devices) devices, \(report.deliveries) deliveries and "
                + "\(report.reminders) reminders.",
            status: .ok,
            link: "/t/\(tenant.id)/console/users"
        )
    }

    /// Everything held of the user, as the admin API's export (an attachment; audited).
    func exportUser(_ visit: Visit, username: String) async throws -> Response {
        let tenant = try requireTenant(visit)
        let export = try await administration.exportUser(tenant: tenant.id, username: username, by: visit.actor)
        let encoder = AdminAPI.exportEncoder()
        var headers = Self.securityHeaders
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentDisposition] = "attachment; filename=\"user-export.json\""
        return Response(
            status: .ok,
            headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(export)))
        )
    }

    func importUsers(_ visit: Visit, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        let mode = UserImportMode(rawValue: fields["mode"] ?? "per-row") ?? .perRow
        let rows = ImportRows(
            body: RequestBody(buffer: ByteBuffer(string: fields["csv"] ?? "")),
            parser: UserImportParser(format: .csv),
            limit: maxFormSize
        )
        let report = try await administration.importUsers(tenant: tenant.id, rows: rows, mode: mode, by: visit.actor) {
            updated in await changed(tenant.id, updated.map { .credentials(username: $0) })
        }
        let summary =
            (report.committed ? "" : "Nothing was written: some rows were refused. ")
            + "\(report.created) created, \(report.updated) updated, \(report.unchanged) unchanged, "
            + "\(report.rejected) rejected."
        let body = render(
            "import",
            [
                "summary": summary, "back": "/t/\(tenant.id)/console/users",
                "rows": report.rows.map { row -> [String: String] in
                    [
                        "line": "\(row.line)", "username": row.username ?? "", "result": row.result.rawValue,
                        "reason": row.reason ?? "",
                    ]
                },
            ] as [String: Any]
        )
        let current = "/t/\(tenant.id)/console/users"
        return html(
            layout(
                title: "Import report",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: current),
                body: body
            ),
            report.committed ? .ok : .unprocessableContent
        )
    }

    // MARK: Audit trail

    func auditPage(_ visit: Visit, _ request: Request) async throws -> Response {
        let tenant = try requireTenant(visit)
        let before = request.uri.queryParameters["before"].flatMap { Int64(String($0)) }
        let entries = try await administration.auditTrail(
            tenant: tenant.id,
            before: before,
            limit: 100,
            by: visit.actor
        )
        let base = "/t/\(tenant.id)/console/audit"
        var values: [String: Any] = [
            "entries": entries.map { entry -> [String: String] in
                [
                    "at": Self.time(entry.at, zone: tenant.defaultTimeZone), "actor": entry.actor,
                    "role": entry.role.rawValue, "action": entry.action, "target": entry.target,
                ]
            }
        ]
        if entries.count == 100, let last = entries.last { values["next"] = base + "?before=\(last.id)" }
        return html(
            layout(
                title: "Audit trail",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("audit", values)
            )
        )
    }

    // MARK: Helpers

    func requireTenant(_ visit: Visit) throws -> Tenant {
        guard let tenant = visit.tenant else { throw EngineError(.notFound, "no tenant") }
        return tenant
    }

    /// Drops what this process cached of what it just changed, as the admin API does.
    func changed(_ tenant: TenantID, _ subjects: [StoreChange.Subject]) async {
        for subject in subjects {
            await caches.apply(StoreChange(sequence: 0, tenant: tenant, subject: subject, origin: "local"))
        }
    }

    static func percent(_ rate: Double?) -> String {
        rate.map { String(format: "%.1f%%", $0 * 100) } ?? "–"
    }

    static func duration(_ seconds: Double?) -> String {
        guard let seconds else { return "–" }
        if seconds < 90 { return "\(Int(seconds.rounded())) s" }
        if seconds < 5400 { return "\(Int((seconds / 60).rounded())) min" }
        return String(format: "%.1f h", seconds / 3600)
    }

    static func time(_ date: Date, zone: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: zone) ?? TimeZone(secondsFromGMT: 0)
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: date)
    }

    /// A username as one path segment.
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;?#%")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func query(_ text: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#%")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
