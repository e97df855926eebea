import Engine
import Foundation
import Hummingbird

/// An impulse in the catalog format (what `catalog import` reads), with whether it is retired.
struct CatalogItemBody: Encodable, Sendable {
    var workingID: String
    var language: String
    var title: String
    var descriptionShort: String
    var description: String
    var duration: Int
    var action: String
    var single: Bool
    var imageURLs: [String]
    var videoURL: String?
    var webURL: String?
    var lifeArea: String
    var series: String?
    var seriesPosition: Int?
    var retired: Bool

    init(_ impulse: Impulse) {
        workingID = impulse.id.rawValue
        language = impulse.language
        title = impulse.title
        descriptionShort = impulse.descriptionShort
        description = impulse.description
        duration = impulse.durationMinutes
        action = impulse.action.rawValue
        single = impulse.single
        imageURLs = impulse.imageURLs
        videoURL = impulse.videoURL
        webURL = impulse.webURL
        lifeArea = impulse.lifeArea.rawValue
        series = impulse.series
        seriesPosition = impulse.seriesPosition
        retired = impulse.retired
    }
}

struct ImportBody: Encodable, Sendable {
    var inserted: Int
    var updated: Int
}

struct RetiredBody: Decodable {
    var retired: Bool
}

struct DeliverBody: Decodable {
    var impulse: String
}

extension AdminAPI {
    /// A tenant's catalog (list, import, read, create or replace, retire) and a user's ledger (read, deliver now).
    func addCatalogRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        let media = api.configuration.mediaDirectory
        let mediaExists: @Sendable (String) -> Bool = { path in
            media.map { MediaFiles.serves(path, folder: $0) } ?? false
        }
        tenantResource(
            router,
            "/impulses",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    let impulses = try await administration.impulses(tenant: tenant.id, by: actor)
                    return try Representation.response(
                        PageBody(items: impulses.map(CatalogItemBody.init), next: nil),
                        for: request
                    )
                },
                .post: { request, _, actor, tenant in
                    let document = try await Self.jsonBody(api, request)
                    let (inserted, updated) = try await administration.importCatalog(
                        tenant: tenant.id,
                        document,
                        mediaExists: mediaExists,
                        by: actor
                    )
                    await changed(tenant.id, [.catalog])
                    return try Representation.response(ImportBody(inserted: inserted, updated: updated), for: request)
                },
            ]
        )
        tenantResource(
            router,
            "/impulses/:impulse",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let impulse = try await administration.impulse(
                        tenant: tenant.id,
                        id: try Self.impulseID(context),
                        by: actor
                    )
                    return try Representation.response(CatalogItemBody(impulse), for: request)
                },
                .put: { request, context, actor, tenant in
                    let item = try await Self.jsonBody(api, request)
                    let (impulse, created) = try await administration.putImpulse(
                        tenant: tenant.id,
                        id: try Self.impulseID(context),
                        item,
                        mediaExists: mediaExists,
                        by: actor
                    )
                    await changed(tenant.id, [.catalog])
                    return try Representation.response(
                        CatalogItemBody(impulse),
                        for: request,
                        status: created ? .created : .ok
                    )
                },
                .patch: { request, context, actor, tenant in
                    let body = try await Self.decode(api, RetiredBody.self, schema: "Retired", from: request)
                    let impulse = try await administration.setRetired(
                        tenant: tenant.id,
                        id: try Self.impulseID(context),
                        retired: body.retired,
                        by: actor
                    )
                    await changed(tenant.id, [.catalog])
                    return try Representation.response(CatalogItemBody(impulse), for: request)
                },
            ]
        )
        tenantResource(
            router,
            "/users/:username/deliveries",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let limit = Int(try api.integer("limit", in: request, default: 50, range: 1...500) ?? 50)
                    let before = try api.integer("before", in: request, default: nil, range: 1...Int64.max)
                    let items = try await administration.deliveries(
                        tenant: tenant.id,
                        username: try Self.parameter("username", context),
                        before: before.map(DeliveryID.init),
                        limit: limit,
                        by: actor
                    )
                    let base = api.baseURL(for: request, scheme: scheme)
                    let next =
                        items.count == limit
                        ? items.last.map {
                            Self.nextPage(
                                request,
                                [
                                    .init(name: "before", value: "\($0.delivery.id.rawValue)"),
                                    .init(name: "limit", value: "\(limit)"),
                                ]
                            )
                        } : nil
                    return try Representation.response(
                        PageBody(items: items.map { DeliveryItem(item: $0, baseURL: base) }, next: next),
                        for: request
                    )
                },
                .post: { request, context, actor, tenant in
                    let body = try await Self.decode(api, DeliverBody.self, schema: "DeliverRequest", from: request)
                    let impulse = try Problem.validating { () throws(EngineError) in try ImpulseID(body.impulse) }
                    let username = try Self.parameter("username", context)
                    _ = try await deliverNow(
                        administration,
                        ledger: api.ledger,
                        gateway: api.pushGateway,
                        tenant: tenant.id,
                        username: username,
                        impulse: impulse,
                        by: actor
                    )
                    let item = try await administration.deliveries(
                        tenant: tenant.id,
                        username: username,
                        before: nil,
                        limit: 1,
                        by: actor
                    )
                    let base = api.baseURL(for: request, scheme: scheme)
                    return try Representation.response(
                        DeliveryItem(item: item[0], baseURL: base),
                        for: request,
                        status: .created
                    )
                },
            ]
        )
    }

    /// A request's JSON body, within the size limit (415 for another content type).
    static func jsonBody(_ api: RESTAPI, _ request: Request) async throws -> Data {
        if let contentType = request.headers[.contentType]?.lowercased(), !contentType.contains("json") {
            throw Problem(.unsupportedMediaType, "unsupported-media-type", "send the body as application/json")
        }
        return Data(try await request.body.collect(upTo: api.configuration.maxBodySize).readableBytesView)
    }

    static func impulseID(_ context: BrokerRequestContext) throws -> ImpulseID {
        do { return try ImpulseID(try parameter("impulse", context)) } catch {
            throw Problem(.notFound, "not-found", "no such impulse")
        }
    }
}
