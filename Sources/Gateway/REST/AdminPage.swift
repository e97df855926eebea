import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// One-shot failures an admin arms for a user's next `CurrentImpulse` (the original `error` command).
final class FailureInjector: Sendable {
    private struct Key: Hashable {
        var tenant: TenantID
        var user: UserID
    }
    private let armed = Mutex(Set<Key>())

    func arm(tenant: TenantID, user: UserID) {
        _ = armed.withLock { $0.insert(Key(tenant: tenant, user: user)) }
    }

    /// True once after `arm`.
    func consume(tenant: TenantID, user: UserID) -> Bool {
        armed.withLock { $0.remove(Key(tenant: tenant, user: user)) != nil }
    }
}

/// The original `/SendPush` admin page, now sending through the real push gateway.
struct SendPushForm: Decodable {
    var command: String
    var impulse: String?
    var target: String?
    var token: String?
    var csrf: String?
}

extension RESTAPI {
    func addAdminRoutes(_ router: Router<BrokerRequestContext>, scheme: String) {
        resource(
            router,
            "/SendPush",
            scheme: scheme,
            [
                .get: { request, _, caller in
                    try requireAdmin(caller)
                    return try await adminPage(caller, message: nil)
                },
                .post: { request, _, caller in
                    try requireAdmin(caller)
                    try requireSameOrigin(request, caller)
                    let buffer = try await request.body.collect(upTo: configuration.maxBodySize)
                    let form: SendPushForm
                    do {
                        form = try URLEncodedFormDecoder().decode(SendPushForm.self, from: String(buffer: buffer))
                    } catch {
                        throw Problem.badRequest(
                            "send the form fields command, impulse, target and token",
                            code: "malformed-body"
                        )
                    }
                    guard csrf.isValid(form.csrf, tenant: caller.tenant.id, user: caller.user.id) else {
                        throw Problem(
                            .forbidden,
                            "csrf-token-invalid",
                            "the form's csrf token is missing or expired; load /SendPush again"
                        )
                    }
                    return try await adminPage(caller, message: try await run(form, caller))
                },
            ]
        )
    }

    func requireAdmin(_ caller: Caller) throws {
        guard caller.user.isAdmin else {
            throw Problem(.forbidden, "admin-required", "this page is for the tenant's admins")
        }
    }

    /// A browser says where a form came from (`Origin`, `Sec-Fetch-Site`): a post from another site is refused
    /// before its token is looked at.
    func requireSameOrigin(_ request: Request, _ caller: Caller) throws {
        let site = request.headers[.secFetchSite]
        let origin = request.headers[.origin]
        let crossSite = site.map { $0 != "same-origin" && $0 != "none" } ?? false
        let foreignOrigin = origin.map { $0 != caller.baseURL } ?? false
        guard !crossSite, !foreignOrigin else {
            throw Problem(.forbidden, "cross-origin", "this form accepts posts from its own page only")
        }
    }

    /// Executes one command; returns what to tell the admin.
    private func run(_ form: SendPushForm, _ caller: Caller) async throws -> String {
        let tenant = caller.tenant
        switch form.command {
        case "send":
            guard let administration else { throw Problem.notFound() }
            let targetName = form.target ?? ""
            let impulseID = try Problem.validating { () throws(EngineError) in try ImpulseID(form.impulse ?? "") }
            let actor = AdminActor(role: .tenantAdmin, name: caller.user.username, tenant: tenant.id)
            do {
                _ = try await deliverNow(
                    administration,
                    ledger: ledger,
                    gateway: pushGateway,
                    tenant: tenant.id,
                    username: targetName,
                    impulse: impulseID,
                    by: actor
                )
            } catch let error as EngineError where error.code == .notFound {
                throw Problem(.unprocessableContent, "invalid-input", "unknown target user or impulse")
            }
            guard pushGateway != nil else { return "assigned \(impulseID) to \(targetName); pushes are disabled" }
            return "assigned \(impulseID) to \(targetName) and queued its push"
        case "fill":
            let impulses = try await store.impulses(tenant: tenant.id)
            let now = Date()
            let day = NewDelivery.reportDay(assignedAt: now, zone: tenant.defaultTimeZone)
            _ = try await ledger.assign(
                impulses.map {
                    NewDelivery(
                        tenant: tenant.id,
                        user: caller.user.id,
                        impulse: $0.id,
                        kind: .manual,
                        assignedAt: now,
                        reportDay: day
                    )
                }
            )
            return "assigned all \(impulses.count) impulses to you"
        case "clear":
            let removed = try await ledger.clear(tenant: tenant.id, user: caller.user.id)
            return "removed your \(removed) impulses"
        case "error":
            failures.arm(tenant: tenant.id, user: caller.user.id)
            return "your next CurrentImpulse will fail with 500"
        case "token":
            let token = try Problem.validating { () throws(EngineError) in try DeviceToken(form.token ?? "") }
            try await registry.register(
                tenant: tenant,
                user: caller.user.id,
                token: token,
                name: "set by SendPush",
                environment: tenant.tokenEnvironment(stated: nil, default: configuration.originalTokenEnvironment)
            )
            return "your token is now \(token.redacted)"
        default:
            throw Problem(.unprocessableContent, "invalid-input", "command must be send, fill, clear, error or token")
        }
    }

    private func adminPage(_ caller: Caller, message: String?) async throws -> Response {
        let tenant = caller.tenant
        let users = try await store.users(tenant: tenant.id)
        let counts = try await store.deliveryCounts(tenant: tenant.id)
        let impulses = try await store.impulses(tenant: tenant.id)
        var rows = ""
        for user in users {
            let tokens = try await store.devices(tenant: tenant.id, owner: user.id).map {
                $0.token.redacted + ($0.quarantinedAt == nil ? "" : " (quarantined)")
            }
            rows +=
                "<tr><td>\(html(user.username))</td><td>\(counts[user.id] ?? 0)</td><td>\(html(tokens.joined(separator: ", ")))</td></tr>\n"
        }
        let catalog = impulses.map {
            "<tr><td>\(html($0.id.rawValue))</td><td>\(html($0.language))</td><td>\(html($0.title))</td><td>\($0.lifeArea.rawValue)</td></tr>"
        }.joined(separator: "\n")
        let token = html(csrf.token(tenant: tenant.id, user: caller.user.id))
        let csrfField = "<input type=\"hidden\" name=\"csrf\" value=\"\(token)\">"
        let options = impulses.map { "<option>\(html($0.id.rawValue))</option>" }.joined()
        let targets = users.map { "<option>\(html($0.username))</option>" }.joined()
        let page = """
            <!doctype html><html><head><meta charset="utf-8"><title>SendPush: \(html(tenant.name))</title></head><body>
            <h1>SendPush: \(html(tenant.name))</h1>
            \(message.map { "<p><strong>\(html($0))</strong></p>" } ?? "")
            <h2>Users</h2><table border="1"><tr><th>user</th><th>impulses</th><th>tokens</th></tr>
            \(rows)</table>
            <h2>Commands</h2>
            <form method="post">\(csrfField)<input type="hidden" name="command" value="send">
            Send <select name="impulse">\(options)</select> to <select name="target">\(targets)</select> now
            <button>send</button></form>
            <form method="post">\(csrfField)<input type="hidden" name="command" value="fill"><button>fill</button> give me every impulse</form>
            <form method="post">\(csrfField)<input type="hidden" name="command" value="clear"><button>clear</button> remove my impulses</form>
            <form method="post">\(csrfField)<input type="hidden" name="command" value="error"><button>error</button>
            make my next CurrentImpulse fail with 500</form>
            <form method="post">\(csrfField)<input type="hidden" name="command" value="token">
            <input name="token" size="64"> <button>token</button> set my device token</form>
            <h2>Catalog</h2><table border="1"><tr><th>id</th><th>language</th><th>title</th><th>life area</th></tr>
            \(catalog)</table></body></html>
            """
        var headers: HTTPFields = [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"]
        headers.append(contentsOf: Self.pageProtection)
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: page)))
    }

    /// The page runs no script, loads nothing, posts only to itself and is never framed.
    static let pageProtection: HTTPFields = [
        .contentSecurityPolicy: "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xFrameOptions: "DENY",
        .referrerPolicy: "no-referrer",
        .xContentTypeOptions: "nosniff",
    ]
}

extension HTTPField.Name {
    // The names are valid tokens, so the failable initialiser cannot fail.
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
    static let strictTransportSecurity = HTTPField.Name("Strict-Transport-Security")!
}

/// Escapes text for HTML element content and attribute values.
func html(_ text: String) -> String {
    var escaped = ""
    for character in text {
        switch character {
        case "&": escaped += "&amp;"
        case "<": escaped += "&lt;"
        case ">": escaped += "&gt;"
        case "\"": escaped += "&quot;"
        case "'": escaped += "&#39;"
        default: escaped.append(character)
        }
    }
    return escaped
}
