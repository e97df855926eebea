import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The admin API: operators under `/admin/v1/` (tenants, operators, the whole audit trail), a tenant's admins
/// (and operators) under `/t/{tenant}/admin/v1/` (users, the tenant's audit trail). Every rule is
/// ``Administration``'s, shared with the command line; this file maps HTTP to it.
struct AdminAPI: Sendable {
    let administration: Administration
    let authenticator: AdminAuthenticator
    let tenants: TenantDirectory
    let caches: CacheInvalidation
    /// Checks, seals and opens uploaded APNs credentials.
    let vault: APNsCredentialVault
    /// `Idempotency-Key` on the creating `POST`s.
    let idempotency: Idempotency
    /// Where tenants' webhook endpoints may point.
    var webhooks = WebhookTargetPolicy()

    typealias OperatorHandler = @Sendable (Request, BrokerRequestContext, AdminActor) async throws -> Response
    typealias TenantHandler = @Sendable (Request, BrokerRequestContext, AdminActor, Tenant) async throws -> Response

    func addRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        addTenantRoutes(router, api: api, scheme: scheme)
        addUserRoutes(router, api: api, scheme: scheme)
        addCatalogRoutes(router, api: api, scheme: scheme)
        addImportRoutes(router, api: api, scheme: scheme)
        addMediaRoutes(router, api: api, scheme: scheme)
        addReportRoutes(router, api: api, scheme: scheme)
        addCredentialRoutes(router, api: api, scheme: scheme)
        addWebhookRoutes(router, api: api, scheme: scheme)
    }

    /// Registers an operator resource under `/admin/v1`, with 405 + `Allow` for other methods.
    func operatorResource(
        _ router: Router<BrokerRequestContext>,
        _ path: String,
        api: RESTAPI,
        scheme: String,
        _ handlers: [HTTPRequest.Method: OperatorHandler]
    ) {
        register(
            router,
            "/admin/v1" + path,
            api: api,
            handlers.mapValues { handler in
                { request, context, requestID in
                    let actor = try await authenticator.operatorActor(
                        request,
                        address: ClientAddress.of(
                            request,
                            context,
                            scheme: scheme,
                            trustedProxies: api.configuration.trustedProxies
                        ),
                        requestID: requestID,
                        logger: context.logger
                    )
                    return try await idempotency.run(request, actor: actor) { try await handler($0, context, actor) }
                }
            }
        )
    }

    /// Registers a tenant's admin resource under `/t/{tenant}/admin/v1`. A `streamed` resource reads its body as it
    /// arrives (`StreamedRoutes`), up to `maxUploadSize` and within `uploadDeadline`; it takes no
    /// `Idempotency-Key` (its writes are idempotent by themselves).
    func tenantResource(
        _ router: Router<BrokerRequestContext>,
        _ path: String,
        api: RESTAPI,
        scheme: String,
        streamed: Bool = false,
        _ handlers: [HTTPRequest.Method: TenantHandler]
    ) {
        register(
            router,
            "/t/:tenant/admin/v1" + path,
            api: api,
            deadline: streamed ? api.configuration.uploadDeadline : nil,
            streamed: streamed,
            handlers.mapValues { handler in
                { request, context, requestID in
                    // An operator may still administer a suspended tenant; its own admins are refused.
                    let segment = context.parameters.get("tenant")
                    let tenant: Tenant
                    do {
                        tenant = try await tenants.resolve(segment, allowingSuspended: true)
                    } catch let problem as Problem where problem.code == "unknown-tenant" {
                        try await authenticator.refuseUnknownTenant(
                            request,
                            segment: segment,
                            address: ClientAddress.of(
                                request,
                                context,
                                scheme: scheme,
                                trustedProxies: api.configuration.trustedProxies
                            ),
                            requestID: requestID,
                            logger: context.logger,
                            notFound: problem
                        )
                    }
                    let actor = try await authenticator.tenantActor(
                        request,
                        tenant: tenant,
                        address: ClientAddress.of(
                            request,
                            context,
                            scheme: scheme,
                            trustedProxies: api.configuration.trustedProxies
                        ),
                        requestID: requestID,
                        logger: context.logger
                    )
                    if streamed { return try await handler(request, context, actor, tenant) }
                    return try await idempotency.run(request, actor: actor) {
                        try await handler($0, context, actor, tenant)
                    }
                }
            }
        )
    }

    private func register(
        _ router: Router<BrokerRequestContext>,
        _ path: String,
        api: RESTAPI,
        deadline: Duration? = nil,
        streamed: Bool = false,
        _ handlers: [HTTPRequest.Method: @Sendable (Request, BrokerRequestContext, String) async throws -> Response]
    ) {
        var allowed = Set(handlers.keys)
        if allowed.contains(.get) { allowed.insert(.head) }
        allowed.insert(.options)
        for (method, handler) in handlers {
            api.routes.record(method, path)
            router.on(RouterPath(path), method: method) { request, context in
                let requestID = Self.requestID(request)
                do {
                    var response = try await api.underDeadline(
                        request,
                        context,
                        limit: deadline,
                        streamed: streamed
                    ) { request in
                        try await handler(request, context, requestID)
                    }
                    response.headers[.requestID] = requestID
                    return response
                } catch var problem as Problem {
                    problem.headers[.requestID] = requestID
                    throw problem
                } catch let error as EngineError {
                    var problem = Problem(error)
                    problem.headers[.requestID] = requestID
                    throw problem
                }
            }
        }
        let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
        api.routes.record(.options, path)
        router.on(RouterPath(path), method: .options) { _, _ in
            Response(status: .noContent, headers: [.allow: allow])
        }
    }

    /// Decodes an admin API body whose members are those of `schema` in the OpenAPI document: a member it does
    /// not have (`timezone` for `timeZone`) is refused with 400 `unknown-member` naming it, not ignored; so is one
    /// inside a member that is an object of a closed shape (`learnedTiming.windowMinute`). A member given as `null`
    /// is refused (400, naming it) rather than read as absent: in a change, "absent" means "leave it", and `null`
    /// would say something else.
    static func decode<T: Decodable>(
        _ api: RESTAPI,
        _ type: T.Type,
        schema: String,
        from request: Request
    ) async throws -> T {
        var request = request
        let buffer = try await request.collectBody(upTo: api.configuration.maxBodySize)
        if let object = try? JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any] {
            try checkMembers(
                object,
                OpenAPIDocument.shape(of: schema) ?? .init(members: [], nested: [:]),
                path: ""
            )
        }
        return try await api.decode(type, from: request)
    }

    /// `object` against `shape`, and each member that has a shape of its own (an array's objects each); `path` is
    /// where `object` sits in the body ("" for the body itself), for the message.
    static func checkMembers(_ object: [String: Any], _ shape: OpenAPIDocument.Shape, path: String) throws {
        if let member = object.keys.sorted().first(where: { object[$0] is NSNull }) {
            throw Problem.badRequest("malformed body: \(path)\(member) must not be null", code: "malformed-body")
        }
        let unknown = object.keys.filter { !shape.members.contains($0) }.sorted()
        if !unknown.isEmpty {
            let what = path.isEmpty ? "this body" : String(path.dropLast())
            throw Problem.badRequest(
                "unknown member\(unknown.count == 1 ? "" : "s") \(unknown.map { path + $0 }.joined(separator: ", ")); "
                    + "\(what) takes \(shape.members.sorted().joined(separator: ", "))",
                code: "unknown-member"
            )
        }
        for (member, inner) in shape.nested {
            if let value = object[member] as? [String: Any] {
                try checkMembers(value, inner, path: path + member + ".")
            } else if let values = object[member] as? [Any] {
                for case let (index, value as [String: Any]) in values.enumerated() {
                    try checkMembers(value, inner, path: path + "\(member)[\(index)].")
                }
            }
        }
    }

    /// The next page of a list, in the one shape every list uses (`/v1/impulses` too): a relative URL, the
    /// request's own path with the next page's query, to follow as it is.
    static func nextPage(_ request: Request, _ query: [URLQueryItem]) -> String {
        var components = URLComponents()
        components.queryItems = query
        return request.uri.path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// The client's `X-Request-ID` when it is a sane one (1-128 visible ASCII characters), otherwise a new one:
    /// it goes into the audit trail and back in the answer.
    static func requestID(_ request: Request) -> String {
        if let given = request.headers[.requestID], (1...128).contains(given.utf8.count),
            given.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        {
            return given
        }
        return UUID().uuidString.lowercased()
    }

    /// A path parameter, percent-decoded (usernames may hold `%`, `/` and non-ASCII characters).
    static func parameter(_ name: String, _ context: BrokerRequestContext) throws -> String {
        guard let raw = context.parameters.get(name), let value = raw.removingPercentEncoding else {
            throw Problem.badRequest("bad \(name) in the path", code: "invalid-query")
        }
        return value
    }

    /// Drops what this process cached of what it just changed (other processes learn it from the change feed).
    func changed(_ tenant: TenantID, _ subjects: [StoreChange.Subject]) async {
        for subject in subjects {
            await caches.apply(StoreChange(sequence: 0, tenant: tenant, subject: subject, origin: "local"))
        }
    }
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-ID")!
}

extension AdminAPI: RouteMount {
    /// Bodies are read within the API's own limit.
    var maxBodySize: Int { 0 }
}
