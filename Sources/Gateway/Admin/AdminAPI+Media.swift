import Engine
import Foundation
import HTTPTypes
import Hummingbird

/// A media file as the admin API shows it: where it is served, absolute.
struct MediaFileBody: Encodable, Sendable {
    var name: String
    var path: String
    var url: String
    var contentType: String
    var size: Int
    var modifiedAt: String

    init(_ file: MediaFile, base: String) {
        name = file.name
        path = file.path
        url = base + file.path
        contentType = file.contentType
        size = file.size
        modifiedAt = rfc3339(file.modifiedAt)
    }
}

extension AdminAPI {
    /// A tenant's media folder: list, upload (`PUT`, read as it arrives), delete.
    func addMediaRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        let folder = api.configuration.mediaDirectory.map(MediaFolder.init(folder:))
        @Sendable func media() throws -> MediaFolder {
            guard let folder else {
                throw Problem(.notFound, "not-found", "this broker serves no media folder")
            }
            return folder
        }
        let limits = MediaLimits(fileSize: api.configuration.maxUploadSize, tenantQuota: api.configuration.mediaQuota)
        tenantResource(
            router,
            "/media",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    let files = try await administration.media(tenant: tenant.id, in: try media(), by: actor)
                    let base = api.baseURL(for: request, scheme: scheme)
                    return try Representation.response(
                        PageBody(items: files.map { MediaFileBody($0, base: base) }, next: nil),
                        for: request
                    )
                }
            ]
        )
        tenantResource(
            router,
            "/media/:name",
            api: api,
            scheme: scheme,
            streamed: true,
            [
                .put: { request, context, actor, tenant in
                    let (file, created) = try await administration.uploadMedia(
                        tenant: tenant.id,
                        name: try Self.mediaName(context),
                        contentType: request.headers[.contentType],
                        statedSize: request.headers[.contentLength].flatMap { Int($0) },
                        parts: request.body.map { Array($0.readableBytesView) },
                        limits: limits,
                        to: try media(),
                        by: actor
                    )
                    var response = try Representation.response(
                        MediaFileBody(file, base: api.baseURL(for: request, scheme: scheme)),
                        for: request,
                        status: created ? .created : .ok
                    )
                    if created { response.headers[.location] = file.path }
                    return response
                },
                .delete: { _, context, actor, tenant in
                    try await administration.deleteMedia(
                        tenant: tenant.id,
                        name: try Self.mediaName(context),
                        in: try media(),
                        by: actor
                    )
                    return Response(status: .noContent)
                },
            ]
        )
    }

    static func mediaName(_ context: BrokerRequestContext) throws -> String {
        guard let name = context.parameters.get("name") else { throw Problem.notFound("no such media file") }
        return name.removingPercentEncoding ?? name
    }
}
