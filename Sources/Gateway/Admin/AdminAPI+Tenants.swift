import Engine
import Foundation
import Hummingbird

extension AdminAPI {
    /// Tenants, operators and the audit trail (operators), and a tenant's own settings and trail (its admins).
    func addTenantRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        operatorResource(
            router,
            "/tenants",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor in
                    let tenants = try await administration.tenants(by: actor)
                    return try Representation.response(
                        PageBody(items: tenants.map(TenantBody.init), next: nil),
                        for: request
                    )
                },
                .post: { request, _, actor in
                    let body = try await Self.decode(api, NewTenantBody.self, schema: "NewTenant", from: request)
                    let tenant = try await administration.createTenant(body.id, body.settings, by: actor)
                    // This node may remember the id as unknown (asked for before it existed): it looks again.
                    await changed(tenant.id, [.catalog])
                    var response = try Representation.response(TenantBody(tenant), for: request, status: .created)
                    response.headers[.location] = "/admin/v1/tenants/\(tenant.id)"
                    return response
                },
            ]
        )
        operatorResource(
            router,
            "/tenants/:id",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor in
                    let tenant = try await administration.tenant(try Self.tenantID(context), by: actor)
                    return try Representation.response(TenantBody(tenant), for: request)
                },
                .patch: { request, context, actor in
                    let settings = try await Self.decode(
                        api,
                        TenantSettings.self,
                        schema: "TenantSettings",
                        from: request
                    )
                    let tenant = try await administration.updateTenant(try Self.tenantID(context), settings, by: actor)
                    await changed(tenant.id, [.catalog])
                    return try Representation.response(TenantBody(tenant), for: request)
                },
                .delete: { request, context, actor in
                    let id = try Self.tenantID(context)
                    let confirm = request.uri.queryParameters["confirm"].map(String.init)
                    let report = try await administration.deleteTenant(
                        id,
                        confirm: confirm,
                        media: api.configuration.mediaDirectory.map(MediaFolder.init(folder:)),
                        by: actor
                    )
                    await changed(id, [.catalog, .apnsCredentials])
                    return try Representation.response(ErasureBody(erased: report), for: request)
                },
            ]
        )
        operatorResource(
            router,
            "/operators",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor in
                    let accounts = try await administration.operators(by: actor)
                    let items = accounts.map { OperatorBody(name: $0.name, createdAt: rfc3339($0.createdAt)) }
                    return try Representation.response(PageBody(items: items, next: nil), for: request)
                },
                .post: { request, _, actor in
                    let body = try await Self.decode(api, NewOperatorBody.self, schema: "NewOperator", from: request)
                    try await administration.addOperator(name: body.name, password: body.password, by: actor)
                    let account = OperatorBody(name: body.name, createdAt: rfc3339(Date()))
                    var response = try Representation.response(account, for: request, status: .created)
                    response.headers[.location] = "/admin/v1/operators/\(body.name)"
                    return response
                },
            ]
        )
        operatorResource(
            router,
            "/audit",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor in try await audit(request, tenant: nil, actor: actor, api: api) }
            ]
        )
        tenantResource(
            router,
            "/tenant",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    try Representation.response(
                        TenantBody(try await administration.tenant(tenant.id, by: actor)),
                        for: request
                    )
                },
                .patch: { request, _, actor, tenant in
                    let settings = try await Self.decode(
                        api,
                        TenantSettings.self,
                        schema: "TenantSettings",
                        from: request
                    )
                    let updated = try await administration.updateTenant(tenant.id, settings, by: actor)
                    await changed(updated.id, [.catalog])
                    return try Representation.response(TenantBody(updated), for: request)
                },
            ]
        )
        tenantResource(
            router,
            "/audit",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in try await audit(request, tenant: tenant.id, actor: actor, api: api)
                }
            ]
        )
    }

    /// A page of the trail, newest first; `next` asks for the entries before the page's last.
    private func audit(_ request: Request, tenant: TenantID?, actor: AdminActor, api: RESTAPI) async throws -> Response
    {
        let limit = Int(try api.integer("limit", in: request, default: 100, range: 1...500) ?? 100)
        let before = try api.integer("before", in: request, default: nil, range: 1...Int64.max)
        let entries = try await administration.auditTrail(tenant: tenant, before: before, limit: limit, by: actor)
        let next =
            entries.count == limit
            ? entries.last.map {
                Self.nextPage(
                    request,
                    [.init(name: "before", value: "\($0.id)"), .init(name: "limit", value: "\(limit)")]
                )
            }
            : nil
        return try Representation.response(PageBody(items: entries.map(AuditBody.init), next: next), for: request)
    }

    static func tenantID(_ context: BrokerRequestContext) throws -> TenantID {
        do { return try TenantID(try parameter("id", context)) } catch {
            throw Problem(.notFound, "unknown-tenant", "unknown tenant")
        }
    }
}
