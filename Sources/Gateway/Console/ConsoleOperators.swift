import Engine
import Foundation
import Hummingbird

/// The operators' pages: the tenants (create one with its first admin, suspend and resume, let its admins manage
/// APNs credentials, delete with its id typed as confirmation) and this node's live state (`/inspect`).
extension Console {
    func addOperatorRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/console") { request, context in
            try await page(request, context, tenant: nil) { visit in try await tenantsPage(visit) }
        }
        router.post("/console/tenants") { request, context in
            try await form(request, context, tenant: nil) { visit, fields in try await createTenant(visit, fields) }
        }
        router.post("/console/tenants/:id/suspended") { request, context in
            let id = try AdminAPI.tenantID(context)
            return try await form(request, context, tenant: nil) { visit, fields in
                try await changeTenant(visit, id, TenantSettings(suspended: fields["suspended"] == "true")) {
                    "\($0.name) is \($0.suspended ? "suspended: its users and admins are refused, nothing is sent" : "active again")."
                }
            }
        }
        router.post("/console/tenants/:id/credentials") { request, context in
            let id = try AdminAPI.tenantID(context)
            return try await form(request, context, tenant: nil) { visit, fields in
                var settings = TenantSettings()
                settings.adminsManageAPNsCredentials = fields["allowed"] == "true"
                return try await changeTenant(visit, id, settings) {
                    $0.adminsManageAPNsCredentials
                        ? "\($0.name)'s admins may now manage its APNs credentials."
                        : "Only operators manage \($0.name)'s APNs credentials now."
                }
            }
        }
        router.post("/console/tenants/:id/delete") { request, context in
            let id = try AdminAPI.tenantID(context)
            return try await form(request, context, tenant: nil) { visit, fields in
                do {
                    let report = try await administration.deleteTenant(
                        id,
                        confirm: fields["confirm"],
                        media: configuration.mediaDirectory.map(MediaFolder.init(folder:)),
                        by: visit.actor
                    )
                    await changed(id, [.catalog, .apnsCredentials])
                    return try await tenantsPage(
                        visit,
                        notice: "\(id) is deleted: \(report.users) users, \(report.devices) devices, "
                            + "\(report.deliveries) deliveries, \(report.impulses) impulses, \(report.mediaFiles) "
                            + "media files."
                    )
                } catch let error as EngineError {
                    return try await tenantsPage(visit, error: error.message, status: Problem(error).status)
                }
            }
        }
        router.get("/console/node") { request, context in
            try await page(request, context, tenant: nil) { visit in try await nodePage(visit) }
        }
    }

    func tenantsPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok,
        typed: [String: String] = [:]
    ) async throws -> Response {
        let csrf = visit.session.csrfToken
        let tenants = try await administration.tenants(by: visit.actor).map { tenant -> [String: String] in
            let path = "/console/tenants/" + Self.segment(tenant.id.rawValue)
            return [
                "id": tenant.id.rawValue, "name": tenant.name, "state": tenant.suspended ? "suspended" : "active",
                "zone": tenant.defaultTimeZone, "topic": tenant.apnsTopic, "href": "/t/\(tenant.id)/console",
                "apnsHref": "/t/\(tenant.id)/console/devices", "csrf": csrf,
                "suspendAction": path + "/suspended", "suspendTo": tenant.suspended ? "false" : "true",
                "suspendLabel": tenant.suspended ? "Resume" : "Suspend",
                "credentialsAction": path + "/credentials",
                "credentialsTo": tenant.adminsManageAPNsCredentials ? "false" : "true",
                "credentials": tenant.adminsManageAPNsCredentials ? "its admins and operators" : "operators",
                "credentialsLabel": tenant.adminsManageAPNsCredentials ? "Operators only" : "Let its admins",
                "deleteAction": path + "/delete",
                "confirmID": "confirm-" + tenant.id.rawValue,
            ]
        }
        let values: [String: Any] = [
            "tenants": tenants, "csrf": csrf, "createAction": "/console/tenants", "id": typed["id"] ?? "",
            "name": typed["name"] ?? "", "timeZone": typed["timeZone"] ?? "", "topic": typed["apnsTopic"] ?? "",
            "admin": typed["adminUsername"] ?? "", "sandbox": typed["apnsEnvironment"] == "sandbox",
        ]
        return html(
            layout(
                title: "Tenants",
                scope: nil,
                visit: visit,
                nav: nav(visit, current: "/console"),
                body: render("tenants", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    /// A tenant, and its first programme administrator when a username is given.
    func createTenant(_ visit: Visit, _ fields: [String: String]) async throws -> Response {
        func value(_ name: String) -> String? {
            let text = (fields[name] ?? "").trimmingCharacters(in: .whitespaces)
            return text.isEmpty ? nil : text
        }
        let tenant: Tenant
        do {
            var settings = TenantSettings(name: value("name"), defaultTimeZone: value("timeZone"))
            settings.apnsTopic = value("apnsTopic")
            settings.apnsEnvironment = value("apnsEnvironment")
            tenant = try await administration.createTenant(try TenantID(fields["id"] ?? ""), settings, by: visit.actor)
        } catch let error as EngineError {
            return try await tenantsPage(visit, error: error.message, status: Problem(error).status, typed: fields)
        }
        guard let username = value("adminUsername") else {
            return try await tenantsPage(visit, notice: "\(tenant.name) is created.", status: .created)
        }
        do {
            _ = try await administration.createUser(
                tenant: tenant.id,
                UserDraft(
                    username: username,
                    password: fields["adminPassword"] ?? "",
                    settings: UserChanges(admin: true)
                ),
                by: visit.actor
            )
            return try await tenantsPage(
                visit,
                notice: "\(tenant.name) is created; \(username) signs in at /t/\(tenant.id)/console.",
                status: .created
            )
        } catch let error as EngineError {
            return try await tenantsPage(
                visit,
                error: "\(tenant.name) is created, but not its admin: \(error.message) (add one on its users page).",
                status: Problem(error).status
            )
        }
    }

    func changeTenant(
        _ visit: Visit,
        _ id: TenantID,
        _ settings: TenantSettings,
        _ describe: (Tenant) -> String
    ) async throws -> Response {
        do {
            let tenant = try await administration.updateTenant(id, settings, by: visit.actor)
            await changed(tenant.id, [.catalog])
            return try await tenantsPage(visit, notice: describe(tenant))
        } catch let error as EngineError {
            return try await tenantsPage(visit, error: error.message, status: Problem(error).status)
        }
    }

    /// This node as `/inspect` shows it to an operator, refreshed every 10 seconds.
    func nodePage(_ visit: Visit) async throws -> Response {
        var values: [String: Any] = [:]
        let view = try await inspector.view()
        values["facts"] = [
            ["label": "node", "value": view.node],
            ["label": "up for", "value": Self.duration(Double(view.uptimeSeconds))],
            ["label": "pushes in flight", "value": view.pushesInFlight.map(String.init) ?? "–"],
            [
                "label": "push limits",
                "value": view.pushLimits.map { "\($0["inFlight"] ?? 0) in flight, batches of \($0["batch"] ?? 0)" }
                    ?? "–",
            ],
        ]
        if let database = view.database {
            values["database"] = [
                "url": database.url, "claims": "\(database.claims)", "leases": "\(database.leases)",
                "pool": "\(database.pool["inUse"] ?? 0) in use of \(database.pool["size"] ?? 0), "
                    + "\(database.pool["waiting"] ?? 0) waiting",
            ]
        }
        if let scheduler = view.scheduler {
            var schedulerValues: [String: Any] = [
                "next": scheduler.nextDueAt ?? "nothing due", "lag": Self.duration(scheduler.lagSeconds),
                "statistics": scheduler.statistics.sorted { $0.key < $1.key }.map {
                    ["label": $0.key, "value": "\($0.value)"]
                },
            ]
            if let failing = scheduler.failing {
                schedulerValues["failing"] =
                    "\(failing.consecutiveFailures) failures in a row since \(failing.since ?? "?")"
                    + (failing.lastError.map { ": \($0)" } ?? "")
            }
            values["scheduler"] = schedulerValues
        }
        values["tenants"] = view.tenants.map { tenant -> [String: String] in
            var row = [
                "tenant": tenant.tenant, "queued": "\(tenant.queued)", "paused": tenant.configurationError ?? "",
                "connections": "\(tenant.apns.reduce(0) { $0 + $1.connections.count })",
            ]
            let unreachable = tenant.apns.compactMap { pool in
                pool.unreachable.map {
                    "\(pool.environment): \($0.lastError ?? "unreachable") for \($0.forSeconds) s"
                }
            }
            row["unreachable"] = unreachable.joined(separator: "; ")
            return row
        }
        return html(
            layout(
                title: "This node",
                scope: nil,
                visit: visit,
                nav: nav(visit, current: "/console/node"),
                body: render("node", values),
                refresh: 10
            )
        )
    }
}
