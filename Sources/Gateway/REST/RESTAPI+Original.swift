import Engine
import Foundation
import HTTPTypes
import Hummingbird

extension RESTAPI {
    /// `GET /CurrentImpulse` and `POST /RegisterToken`, byte-compatible with the first system.
    func addOriginalRoutes(_ router: Router<BrokerRequestContext>, scheme: String) {
        resource(
            router,
            "/CurrentImpulse",
            scheme: scheme,
            [
                .get: { request, _, caller in
                    if failures.consume(tenant: caller.tenant.id, user: caller.user.id) {
                        throw Problem(.internalServerError, "injected-failure", "failure injected from SendPush")
                    }
                    let limit = try integer(
                        "limit",
                        in: request,
                        default: Int64(configuration.defaultPageSize),
                        range: 1...Int64(configuration.maxPageSize)
                    )
                    let since = try integer("since", in: request, default: nil, range: 0...Int64.max)
                    let page = try await ledger.page(
                        tenant: caller.tenant.id,
                        user: caller.user.id,
                        after: since.map(DeliveryID.init),
                        limit: Int(limit ?? 10),
                        markFetchedAt: request.method == .get ? Date() : nil
                    )
                    let items = page.items.map { ImpulseItem(item: $0, baseURL: caller.baseURL) }
                    return try Representation.response(
                        ImpulseList(items: items),
                        for: request,
                        lastModified: page.items.first?.delivery.assignedAt,
                        cache: representations,
                        key: "\(caller.tenant.id)/\(caller.user.id)/\(limit ?? 0)/\(since ?? -1)"
                    )
                }
            ]
        )
        resource(
            router,
            "/RegisterToken",
            scheme: scheme,
            [
                .post: { request, _, caller in
                    let body = try await decodeOriginal(RegisterTokenBody.self, from: request)
                    let token = try Problem.validating { () throws(EngineError) in try DeviceToken(body.DeviceToken) }
                    try await registry.register(
                        tenant: caller.tenant,
                        user: caller.user.id,
                        token: token,
                        name: body.DeviceName,
                        environment: caller.tenant.tokenEnvironment(
                            stated: nil,
                            default: configuration.originalTokenEnvironment
                        )
                    )
                    return Response(status: .noContent)
                }
            ]
        )
    }
}
