import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore

/// The web console: server-rendered pages for operators (`/console`) and a tenant's programme administrators
/// (`/t/{tenant}/console`), on the admin API's rules (``Administration``). Sign-in opens a session kept in the
/// store (every node knows it): a `__Host-` cookie that is `Secure`, `HttpOnly` and `SameSite=Strict`, ended after
/// 30 idle minutes or 8 hours, at sign-out, or when the account stops being an admin. Every form carries the
/// session's CSRF token, and a POST whose `Origin` is another site is refused. Pages allow only the console's own
/// stylesheet and script (Content-Security-Policy), and every value is HTML-escaped.
struct Console: Sendable {
    static let cookie = "__Host-impulse-console"
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; "
            + "frame-ancestors 'none'; base-uri 'none'",
        .xFrameOptions: "DENY",
        .xContentTypeOptions: "nosniff",
        .referrerPolicy: "same-origin",
        .cacheControl: "no-store",
    ]

    let administration: Administration
    let authenticator: AdminAuthenticator
    let tenants: TenantDirectory
    let store: any BrokerStore
    let caches: CacheInvalidation
    /// The REST API's settings: the media folder and its limits.
    let configuration: RESTConfiguration
    /// Checks and seals uploaded APNs credentials (nil: no credential key, no uploads).
    let vault: APNsCredentialVault
    /// Where tenants' webhooks may point.
    let webhookPolicy: WebhookTargetPolicy
    /// This node's live state (APNs connections, the scheduler), as `/inspect` shows it.
    let inspector: Inspector
    let library: MustacheLibrary
    let policy: ConsoleSessionPolicy
    let maxFormSize: Int

    init(
        administration: Administration,
        authenticator: AdminAuthenticator,
        tenants: TenantDirectory,
        store: any BrokerStore,
        caches: CacheInvalidation,
        configuration: RESTConfiguration,
        inspector: Inspector,
        vault: APNsCredentialVault,
        webhookPolicy: WebhookTargetPolicy,
        policy: ConsoleSessionPolicy = ConsoleSessionPolicy(),
        maxFormSize: Int = 1 << 20
    ) throws {
        self.administration = administration
        self.authenticator = authenticator
        self.tenants = tenants
        self.store = store
        self.caches = caches
        self.configuration = configuration
        self.inspector = inspector
        self.vault = vault
        self.webhookPolicy = webhookPolicy
        self.library = try ConsoleTemplates.library()
        self.policy = policy
        self.maxFormSize = maxFormSize
    }

    /// A signed-in request: its session and the actor the admin rules see.
    struct Visit: Sendable {
        var session: ConsoleSession
        var actor: AdminActor
        var tenant: Tenant?
    }

    // MARK: Routes

    func addRoutes(_ router: Router<BrokerRequestContext>, scheme: String) {
        router.get("/console/assets/console.css") { _, _ in Self.asset(ConsoleAssets.css, "text/css; charset=utf-8") }
        router.get("/console/assets/console.js") { _, _ in
            Self.asset(ConsoleAssets.javascript, "text/javascript; charset=utf-8")
        }
        router.get("/console/sign-in") { request, _ in try signInPage(tenant: nil, request: request) }
        router.post("/console/sign-in") { request, context in
            try await signIn(request, context, tenant: nil, scheme: scheme)
        }
        router.get("/t/:tenant/console/sign-in") { request, context in
            try signInPage(tenant: try await tenant(context), request: request)
        }
        router.post("/t/:tenant/console/sign-in") { request, context in
            try await signIn(request, context, tenant: try await tenant(context), scheme: scheme)
        }
        router.post("/console/sign-out") { request, context in try await signOut(request, context) }
        router.post("/console/sign-out-everywhere") { request, context in
            try await signOut(request, context, everywhere: true)
        }
        addOperatorRoutes(router)
        router.get("/t/:tenant/console") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in
                try await dashboard(visit)
            }
        }
        router.get("/t/:tenant/console/report") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in
                try await reportPage(visit, request)
            }
        }
        router.get("/t/:tenant/console/report/:table") { request, context in
            let file = try AdminAPI.parameter("table", context)
            return try await page(request, context, tenant: try await tenant(context)) { visit in
                try await reportCSV(visit, request, file: file)
            }
        }
        router.get("/t/:tenant/console/users") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in
                try await usersPage(visit, request)
            }
        }
        router.post("/t/:tenant/console/users") { request, context in
            try await form(request, context) { visit, fields in try await createUser(visit, fields, request) }
        }
        router.post("/t/:tenant/console/users/import") { request, context in
            try await form(request, context) { visit, fields in try await importUsers(visit, fields) }
        }
        router.post("/t/:tenant/console/users/:username/enabled") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, fields in
                try await setEnabled(visit, username: username, fields)
            }
        }
        router.post("/t/:tenant/console/users/:username/delete") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await form(request, context) { visit, _ in try await deleteUser(visit, username: username) }
        }
        router.get("/t/:tenant/console/users/:username/export") { request, context in
            let username = try AdminAPI.parameter("username", context)
            return try await page(request, context, tenant: try await tenant(context)) { visit in
                try await exportUser(visit, username: username)
            }
        }
        addCatalogRoutes(router)
        addDevicesRoutes(router)
        router.get("/t/:tenant/console/audit") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in
                try await auditPage(visit, request)
            }
        }
        addWebhooksRoutes(router)
        addSettingsRoutes(router)
        addUserRoutes(router)
    }

    func tenant(_ context: BrokerRequestContext) async throws -> Tenant {
        try await tenants.resolve(context.parameters.get("tenant"), allowingSuspended: true)
    }

    // MARK: Sessions

    /// The request's live session, if it may see `tenant`'s pages (nil: the operator's pages).
    func visit(_ request: Request, tenant: Tenant?) async throws -> Visit? {
        guard let value = Self.cookieValue(request), value.utf8.count <= 128,
            let session = try await store.consoleSession(id: ConsoleSessionPolicy.hash(value))
        else { return nil }
        let now = Date()
        guard policy.isLive(session, at: now) else {
            try await store.deleteConsoleSession(id: session.id)
            return nil
        }
        let requestID = AdminAPI.requestID(request)
        switch session.role {
        case .operator:
            // An operator account deleted meanwhile ends its sessions.
            guard try await store.operatorAccount(name: session.name) != nil else { return nil }
        case .tenantAdmin:
            // A tenant admin sees only their tenant, and only while still an enabled admin of it.
            guard let tenant, session.tenant == tenant.id,
                let user = try await store.user(tenant: tenant.id, username: session.name), user.enabled,
                (try? AdminAuthenticator.admin(user, of: tenant, requestID: requestID)) != nil
            else { return nil }
        }
        if policy.needsTouch(session, at: now) { try await store.touchConsoleSession(id: session.id, at: now) }
        return Visit(session: session, actor: session.actor(requestID: requestID), tenant: tenant)
    }

    static func cookieValue(_ request: Request) -> String? {
        for field in request.headers[values: .cookie] {
            for part in field.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0] == cookie { return String(pair[1]) }
            }
        }
        return nil
    }

    func signInPage(
        tenant: Tenant?,
        request: Request,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) throws
        -> Response
    {
        let action = tenant.map { "/t/\($0.id)/console/sign-in" } ?? "/console/sign-in"
        let body = render(
            "sign-in",
            [
                "action": action,
                "nameLabel": tenant == nil ? "Operator name" : "Username",
                "hint": tenant.map { "Programme administrators of \($0.name) sign in here." }
                    ?? "Operators sign in here; a programme's administrators use their programme's console address.",
            ]
        )
        return html(
            layout(title: "Sign in", scope: tenant?.name, visit: nil, nav: [], body: body, error: error),
            status
        )
    }

    func signIn(
        _ request: Request,
        _ context: BrokerRequestContext,
        tenant: Tenant?,
        scheme: String
    ) async throws
        -> Response
    {
        guard Self.sameOrigin(request) else { return forbidden("This form came from another site.") }
        let fields = try await Self.formFields(request, limit: 8 * 1024)
        let name = fields["name"] ?? ""
        let password = fields["password"] ?? ""
        let address = ClientAddress.of(request, context, scheme: scheme, trustedProxies: configuration.trustedProxies)
        let requestID = AdminAPI.requestID(request)
        let actor: AdminActor
        do {
            if let tenant {
                actor = try await authenticator.tenantAdminActor(
                    username: name,
                    password: password,
                    tenant: tenant,
                    address: address,
                    requestID: requestID,
                    logger: context.logger
                )
            } else {
                actor = try await authenticator.operatorActor(
                    name: name,
                    password: password,
                    address: address,
                    requestID: requestID,
                    logger: context.logger
                )
            }
        } catch let problem as Problem {
            // The same words for an unknown name and a wrong password; throttled attempts say so.
            let status = HTTPResponse.Status(code: problem.status.code)
            let message =
                problem.status.code == 429
                ? "Too many failed sign-ins; try again in a few minutes."
                : problem.status.code == 403
                    ? "This account may not use the console." : "Wrong name or password."
            return try signInPage(tenant: tenant, request: request, error: message, status: status)
        }
        let (cookie, session) = ConsoleSessionPolicy.open(for: actor, at: Date())
        try await store.createConsoleSession(session)
        context.logger.notice(
            "console sign-in",
            metadata: ["actor.role": "\(actor.role.rawValue)", "tenant.id": "\(tenant?.id.rawValue ?? "-")"]
        )
        var response = redirect(tenant.map { "/t/\($0.id)/console" } ?? "/console")
        response.headers[.setCookie] = "\(Self.cookie)=\(cookie); Path=/; Secure; HttpOnly; SameSite=Strict"
        return response
    }

    /// Ends this session, or (`everywhere`) every session of its account, on every device and node.
    func signOut(
        _ request: Request,
        _ context: BrokerRequestContext,
        everywhere: Bool = false
    ) async throws -> Response {
        guard Self.sameOrigin(request) else { return forbidden("This form came from another site.") }
        let fields = try await Self.formFields(request, limit: 8 * 1024)
        var back = "/console/sign-in"
        if let value = Self.cookieValue(request),
            let session = try await store.consoleSession(id: ConsoleSessionPolicy.hash(value))
        {
            guard ConsoleSessionPolicy.matches(fields["csrf"], session.csrfToken) else {
                return forbidden("The form's security token is missing or stale; reload the page and try again.")
            }
            if everywhere {
                let ended = try await store.deleteConsoleSessions(
                    role: session.role,
                    name: session.name,
                    tenant: session.tenant
                )
                context.logger.notice("console sessions ended everywhere", metadata: ["sessions": "\(ended)"])
            } else {
                try await store.deleteConsoleSession(id: session.id)
            }
            if let tenant = session.tenant { back = "/t/\(tenant)/console/sign-in" }
        }
        var response = redirect(back)
        response.headers[.setCookie] = "\(Self.cookie)=; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=0"
        return response
    }

    /// A page for a signed-in visitor, or a redirect to sign in.
    func page(
        _ request: Request,
        _ context: BrokerRequestContext,
        tenant: Tenant?,
        _ render: (Visit) async throws -> Response
    ) async throws -> Response {
        guard let visit = try await visit(request, tenant: tenant) else {
            return redirect(tenant.map { "/t/\($0.id)/console/sign-in" } ?? "/console/sign-in")
        }
        if tenant == nil, visit.actor.role != .operator { return forbidden("This page is the operators'.") }
        do {
            return try await render(visit)
        } catch let error as EngineError {
            return message(visit, title: "Not possible", text: error.message, status: Problem(error).status)
        }
    }

    /// A form post: same origin, a live session of the tenant, and the session's CSRF token.
    func form(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ handle: (Visit, [String: String]) async throws -> Response
    ) async throws -> Response {
        try await form(request, context, tenant: try await tenant(context), handle)
    }

    /// A form post of `tenant`'s pages, or (nil) of the operators' pages.
    func form(
        _ request: Request,
        _ context: BrokerRequestContext,
        tenant: Tenant?,
        _ handle: (Visit, [String: String]) async throws -> Response
    ) async throws -> Response {
        guard Self.sameOrigin(request) else { return forbidden("This form came from another site.") }
        guard let visit = try await visit(request, tenant: tenant) else {
            return redirect(tenant.map { "/t/\($0.id)/console/sign-in" } ?? "/console/sign-in")
        }
        if tenant == nil, visit.actor.role != .operator { return forbidden("This page is the operators'.") }
        let fields = try await Self.formFields(request, limit: maxFormSize)
        guard ConsoleSessionPolicy.matches(fields["csrf"], visit.session.csrfToken) else {
            context.logger.notice("console form refused: no valid CSRF token")
            return forbidden("The form's security token is missing or stale; reload the page and try again.")
        }
        do {
            return try await handle(visit, fields)
        } catch let error as EngineError {
            return message(visit, title: "Not possible", text: error.message, status: Problem(error).status)
        }
    }

    /// A POST whose `Origin` (when the browser sends one) is this host.
    static func sameOrigin(_ request: Request) -> Bool {
        guard let origin = request.headers[.origin] else { return true }
        guard let host = request.head.authority, let url = URL(string: origin),
            let originHost = url.host
        else { return false }
        let originAuthority = url.port.map { "\(originHost):\($0)" } ?? originHost
        return originAuthority.lowercased() == host.lowercased()
            || (url.port == nil && host.lowercased() == originHost.lowercased() + ":443")
    }

    /// An `application/x-www-form-urlencoded` body, at most `limit` bytes.
    static func formFields(_ request: Request, limit: Int) async throws -> [String: String] {
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        let text = String(buffer: buffer).replacingOccurrences(of: "+", with: "%20")
        var components = URLComponents()
        components.percentEncodedQuery = text
        var fields: [String: String] = [:]
        for item in components.queryItems ?? [] where fields[item.name] == nil { fields[item.name] = item.value ?? "" }
        return fields
    }

    // MARK: Rendering

    struct NavItem {
        var href: String
        var label: String
        var current: Bool
    }

    func nav(_ visit: Visit, current: String) -> [NavItem] {
        var items: [(String, String)] = []
        if let tenant = visit.tenant {
            let base = "/t/\(tenant.id)/console"
            items = [
                (base, "Today"), (base + "/report", "Report"), (base + "/users", "Users"),
                (base + "/catalog", "Catalog"), (base + "/devices", "Devices"),
                (base + "/webhooks", "Webhooks"), (base + "/settings", "Settings"),
                (base + "/audit", "Audit trail"),
            ]
        }
        if visit.actor.role == .operator {
            items.append(("/console", "Tenants"))
            items.append(("/console/node", "This node"))
        }
        return items.map { NavItem(href: $0.0, label: $0.1, current: $0.0 == current) }
    }

    func render(_ template: String, _ values: Any) -> String {
        guard let text = library.render(values, withTemplate: template) else {
            // A page without its template is a defect of this file: loud in debug builds (the tests).
            assertionFailure("the console has no template \(template)")
            return "<p>This page is missing.</p>"
        }
        return text
    }

    func layout(
        title: String,
        scope: String?,
        visit: Visit?,
        nav: [NavItem],
        body: String,
        notice: String? = nil,
        error: String? = nil,
        refresh: Int? = nil
    ) -> String {
        var values: [String: Any] = [
            "title": title, "body": body, "nav": nav, "hasNav": !nav.isEmpty, "signOut": "/console/sign-out",
            "signOutEverywhere": "/console/sign-out-everywhere",
        ]
        if let scope { values["scope"] = scope }
        if let notice { values["notice"] = notice }
        if let error { values["error"] = error }
        if let refresh { values["refresh"] = refresh }
        if let visit {
            values["signedIn"] = true
            values["name"] = visit.actor.name
            values["role"] = visit.actor.role == .operator ? "operator" : "programme administrator"
            values["csrf"] = visit.session.csrfToken
        }
        return render("layout", values)
    }

    func html(_ text: String, _ status: HTTPResponse.Status = .ok) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    func redirect(_ location: String) -> Response {
        var headers = Self.securityHeaders
        headers[.location] = location
        return Response(status: .seeOther, headers: headers)
    }

    func forbidden(_ text: String) -> Response {
        html(
            layout(title: "Refused", scope: nil, visit: nil, nav: [], body: render("message", ["text": text])),
            .forbidden
        )
    }

    func message(
        _ visit: Visit,
        title: String,
        text: String,
        status: HTTPResponse.Status,
        link: String? = nil
    )
        -> Response
    {
        var values: [String: Any] = ["text": text]
        if let link {
            values["link"] = link
            values["linkLabel"] = "Back"
        }
        return html(
            layout(
                title: title,
                scope: visit.tenant?.name,
                visit: visit,
                nav: nav(visit, current: ""),
                body: render("message", values)
            ),
            status
        )
    }

    static func asset(_ text: String, _ type: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: type, .cacheControl: "public, max-age=3600", .xContentTypeOptions: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }
}
