import Engine
import Foundation
import Hummingbird

extension AdminAPI {
    /// A tenant's users: list and search, create, read, change, reset a password, erase, export.
    func addUserRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        tenantResource(
            router,
            "/users",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    let limit = Int(try api.integer("limit", in: request, default: 100, range: 1...500) ?? 100)
                    let search = request.uri.queryParameters["search"].map(String.init)
                    let after = request.uri.queryParameters["after"].map(String.init)
                    let users = try await administration.users(
                        tenant: tenant.id,
                        search: search,
                        after: after,
                        limit: limit,
                        by: actor
                    )
                    var next: String?
                    if users.count == limit, let last = users.last {
                        var query = [
                            URLQueryItem(name: "after", value: last.username), .init(name: "limit", value: "\(limit)"),
                        ]
                        if let search { query.append(.init(name: "search", value: search)) }
                        next = Self.nextPage(request, query)
                    }
                    return try Representation.response(
                        PageBody(items: users.map(AdminUserBody.init), next: next),
                        for: request
                    )
                },
                .post: { request, _, actor, tenant in
                    let draft = try await Self.decode(api, UserDraft.self, schema: "NewUser", from: request)
                    let user = try await administration.createUser(tenant: tenant.id, draft, by: actor)
                    var response = try Representation.response(AdminUserBody(user), for: request, status: .created)
                    response.headers[.location] = Self.userPath(tenant.id, user.username)
                    return response
                },
            ]
        )
        tenantResource(
            router,
            "/users/:username",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let user = try await administration.user(
                        tenant: tenant.id,
                        username: try Self.parameter("username", context),
                        by: actor
                    )
                    return try Representation.response(AdminUserBody(user), for: request)
                },
                .patch: { request, context, actor, tenant in
                    let changes = try await Self.decode(api, UserChanges.self, schema: "UserChanges", from: request)
                    let username = try Self.parameter("username", context)
                    let user = try await administration.updateUser(
                        tenant: tenant.id,
                        username: username,
                        changes,
                        by: actor
                    )
                    await changed(tenant.id, [.credentials(username: username), .profile(user.id)])
                    return try Representation.response(AdminUserBody(user), for: request)
                },
                .delete: { request, context, actor, tenant in
                    let username = try Self.parameter("username", context)
                    let user = try await administration.user(tenant: tenant.id, username: username, by: actor)
                    let report = try await administration.deleteUser(tenant: tenant.id, username: username, by: actor)
                    await changed(tenant.id, [.credentials(username: username), .ledger(user.id)])
                    return try Representation.response(ErasureBody(erased: report), for: request)
                },
            ]
        )
        tenantResource(
            router,
            "/users/:username/password",
            api: api,
            scheme: scheme,
            [
                .put: { request, context, actor, tenant in
                    let body = try await Self.decode(api, PasswordBody.self, schema: "Password", from: request)
                    let username = try Self.parameter("username", context)
                    try await administration.resetPassword(
                        tenant: tenant.id,
                        username: username,
                        password: body.password,
                        by: actor
                    )
                    await changed(tenant.id, [.credentials(username: username)])
                    return Response(status: .noContent)
                }
            ]
        )
        tenantResource(
            router,
            "/users/:username/learned-time",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let view = try await administration.learnedTime(
                        tenant: tenant.id,
                        username: try Self.parameter("username", context),
                        by: actor
                    )
                    return try Representation.response(view, for: request)
                },
                .put: { request, context, actor, tenant in
                    let body = try await Self.decode(
                        api,
                        LearnedTimeOptIn.self,
                        schema: "LearnedTimeOptIn",
                        from: request
                    )
                    let username = try Self.parameter("username", context)
                    let view = try await administration.setLearnedTimeOptIn(
                        tenant: tenant.id,
                        username: username,
                        optedIn: body.optedIn,
                        by: actor
                    )
                    return try Representation.response(view, for: request)
                },
            ]
        )
        tenantResource(
            router,
            "/users/:username/export",
            api: api,
            scheme: scheme,
            [
                .get: { _, context, actor, tenant in
                    let username = try Self.parameter("username", context)
                    let export = try await administration.exportUser(tenant: tenant.id, username: username, by: actor)
                    let encoder = Self.exportEncoder()
                    return Response(
                        status: .ok,
                        headers: [
                            .contentType: "application/json; charset=utf-8",
                            .contentDisposition: "attachment; filename=\"user-export.json\"",
                            .cacheControl: "no-store",
                        ],
                        body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(export)))
                    )
                }
            ]
        )
    }

    /// The encoder of a user's export (RFC 3339 dates), the admin API's and the console's.
    static func exportEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(rfc3339(date))
        }
        return encoder
    }

    /// A user's path, the username percent-encoded as a path segment.
    static func userPath(_ tenant: TenantID, _ username: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/%")
        return
            "/t/\(tenant)/admin/v1/users/\(username.addingPercentEncoding(withAllowedCharacters: allowed) ?? username)"
    }
}
