import Engine
import Foundation
import HTTPTypes
import Hummingbird

extension RESTAPI {
    /// The versioned API under `/v1`.
    func addVersionedRoutes(_ router: Router<BrokerRequestContext>, scheme: String) {
        resource(router, "/v1/impulses", scheme: scheme, [.get: listImpulses])
        resource(
            router,
            "/v1/impulses/:impulse",
            scheme: scheme,
            [
                .get: { request, context, caller in
                    try await impulse(request, context, caller, mark: request.method == .get ? .fetched : nil)
                },
                .post: remind,
            ]
        )
        resource(
            router,
            "/v1/impulses/:impulse/read",
            scheme: scheme,
            [
                .put: { request, context, caller in try await impulse(request, context, caller, mark: .read) }
            ]
        )
        resource(router, "/v1/reminders", scheme: scheme, [.get: listReminders])
        resource(router, "/v1/reminders/:reminder", scheme: scheme, [.get: getReminder, .delete: deleteReminder])
        resource(
            router,
            "/v1/admin/inspect",
            scheme: scheme,
            [
                .get: { request, _, caller in
                    try requireAdmin(caller)
                    guard let inspector else { throw Problem.notFound() }
                    return try Representation.response(try await inspector.view(tenant: caller.tenant.id), for: request)
                }
            ]
        )
        resource(router, "/v1/me", scheme: scheme, [.get: profile])
        resource(router, "/v1/me/preferences", scheme: scheme, [.put: updatePreferences])
        resource(router, "/v1/me/learned-time", scheme: scheme, [.get: learnedTime, .put: updateLearnedTime])
        resource(
            router,
            "/v1/devices",
            scheme: scheme,
            [
                .get: { request, _, caller in
                    let devices = try await registry.devices(tenant: caller.tenant, user: caller.user.id)
                    return try Representation.response(DeviceList(devices: devices.map(DeviceView.init)), for: request)
                }
            ]
        )
        resource(router, "/v1/devices/:token", scheme: scheme, [.put: putDevice, .delete: deleteDevice])
    }

    private func listImpulses(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let limit = Int(
            try integer(
                "limit",
                in: request,
                default: Int64(configuration.defaultPageSize),
                range: 1...Int64(configuration.maxPageSize)
            )
                ?? 10
        )
        let since = try integer("since", in: request, default: nil, range: 0...Int64.max).map(DeliveryID.init)
        let before = try integer("before", in: request, default: nil, range: 1...Int64.max).map(DeliveryID.init)
        let page = try await ledger.page(
            tenant: caller.tenant.id,
            user: caller.user.id,
            after: since,
            before: before,
            limit: limit,
            markFetchedAt: request.method == .get ? Date() : nil
        )
        var next: String?
        if page.items.count == limit, let oldest = page.items.last?.delivery.id {
            let sinceQuery = since.map { "&since=\($0.rawValue)" } ?? ""
            next = "\(caller.prefix)/v1/impulses?before=\(oldest.rawValue)&limit=\(limit)\(sinceQuery)"
        }
        let body = DeliveryPage(
            items: page.items.map { DeliveryItem(item: $0, baseURL: caller.baseURL) },
            unreadCount: page.unreadCount,
            next: next
        )
        return try Representation.response(
            body,
            for: request,
            lastModified: page.items.map(\.delivery.lastChange).max()
        )
    }

    private func impulse(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller,
        mark: DeliveryMark.Kind?
    ) async throws -> Response {
        let id: ImpulseID
        do { id = try ImpulseID(context.parameters.get("impulse") ?? "") } catch { throw Problem.notFound() }
        guard let item = try await ledger.item(tenant: caller.tenant.id, user: caller.user.id, impulse: id, mark: mark)
        else {
            throw Problem(.notFound, "not-found", "no impulse '\(id)' was delivered to you")
        }
        return try Representation.response(
            DeliveryItem(item: item, baseURL: caller.baseURL),
            for: request,
            lastModified: item.delivery.lastChange
        )
    }

    private func profile(_ request: Request, _ context: BrokerRequestContext, _ caller: Caller) async throws -> Response
    {
        let unread = try await ledger.unreadCount(tenant: caller.tenant.id, user: caller.user.id)
        return try Representation.response(
            ProfileBody(user: caller.user, tenant: caller.tenant, unreadCount: unread),
            for: request
        )
    }

    private func updatePreferences(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let update = try await decode(PreferencesUpdate.self, from: request)
        let (language, preferences) = try Problem.validating { () throws(EngineError) in try update.validated() }
        try await store.setPreferences(
            tenant: caller.tenant.id,
            user: caller.user.id,
            language: language,
            preferences: preferences
        )
        authenticator.invalidate(
            StoreChange(sequence: 0, tenant: caller.tenant.id, subject: .profile(caller.user.id), origin: store.nodeID)
        )
        var user = caller.user
        user.language = language
        user.preferences = preferences
        let unread = try await ledger.unreadCount(tenant: caller.tenant.id, user: caller.user.id)
        return try Representation.response(
            ProfileBody(user: user, tenant: caller.tenant, unreadCount: unread),
            for: request
        )
    }

    /// `GET /v1/me/learned-time`: my learned delivery time and why it is what it is.
    private func learnedTime(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let timing = try await store.userTiming(tenant: caller.tenant.id, user: caller.user.id)
        return try Representation.response(
            LearnedTimeView(tenant: caller.tenant, user: caller.user, timing: timing),
            for: request
        )
    }

    /// `PUT /v1/me/learned-time`: whether a delivery time I set myself may be learned.
    private func updateLearnedTime(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let body = try await decode(LearnedTimeOptIn.self, from: request)
        try await store.setTimingOptIn(
            tenant: caller.tenant.id,
            user: caller.user.id,
            optedIn: body.optedIn,
            audit: nil
        )
        return try await learnedTime(request, context, caller)
    }

    private func putDevice(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let text = context.parameters.get("token") ?? ""
        let body = try await decode(DeviceBody.self, from: request)
        let channel = body.platform ?? .apns
        let token = try Problem.validating { () throws(EngineError) in try DeviceToken(text, channel: channel) }
        guard configuration.pushChannels.contains(channel) else {
            throw Problem(
                .unprocessableContent,
                "platform-not-served",
                "this broker does not push to \(channel.rawValue) devices: it is not configured"
            )
        }
        let outcome = try await registry.register(
            tenant: caller.tenant,
            user: caller.user.id,
            token: token,
            name: body.name,
            environment: caller.tenant.tokenEnvironment(stated: body.environment, default: .production),
            channel: channel
        )
        guard
            let device = try await store.device(tenant: caller.tenant.id, topic: caller.tenant.apnsTopic, token: token)
        else {
            throw Problem.notFound()
        }
        var response = try Representation.response(
            DeviceView(device),
            for: request,
            status: outcome == .created ? .created : .ok
        )
        if outcome == .created { response.headers[.location] = "\(caller.prefix)/v1/devices/\(token.rawValue)" }
        return response
    }

    private func deleteDevice(
        _ request: Request,
        _ context: BrokerRequestContext,
        _ caller: Caller
    ) async throws -> Response {
        let text = context.parameters.get("token") ?? ""
        let token = try Problem.validating { () throws(EngineError) in try DeviceToken(anyChannel: text) }
        // Idempotent, and silent about tokens of other users: the answer is the same whether or not it was ours.
        try await registry.unregister(tenant: caller.tenant, user: caller.user.id, token: token)
        return Response(status: .noContent)
    }

    /// Media files are public: no tenant, no login, single byte ranges supported (`MediaFiles`).
    func addMediaRoutes(_ router: Router<BrokerRequestContext>) {
        guard let folder = configuration.mediaDirectory else { return }
        let media = MediaFiles(folder: folder)
        router.get("/media/**") { request, context in try await media.respond(request, context: context) }
        routes.record(.get, "/media/**")
    }
}

extension Delivery {
    /// The latest moment this delivery changed state.
    var lastChange: Date { [assignedAt, fetchedAt, readAt, pushedAt].compactMap { $0 }.max() ?? assignedAt }
}
