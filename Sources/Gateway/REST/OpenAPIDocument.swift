import Foundation
import Hummingbird

/// The OpenAPI 3.1 document of the whole HTTP surface (`REST/openapi.json`, committed beside the routes), served
/// at `/openapi.json`.
enum OpenAPIDocument {
    /// The document's bytes, read once; a build without it fails the start (it is part of the product).
    static let bytes: Result<[UInt8], Missing> = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"),
            let data = FileManager.default.contents(atPath: url.path)
        else { return .failure(Missing()) }
        return .success(Array(data))
    }()

    /// The members a schema of the document names (its `properties`): what a strict body may hold.
    static func members(of schema: String) -> Set<String> {
        schemaMembers[schema] ?? []
    }

    private static let schemaMembers: [String: Set<String>] = {
        guard case .success(let bytes) = bytes,
            let document = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            let components = document["components"] as? [String: Any],
            let schemas = components["schemas"] as? [String: Any]
        else { return [:] }
        return schemas.compactMapValues { schema in
            ((schema as? [String: Any])?["properties"] as? [String: Any]).map { Set($0.keys) }
        }
    }()

    struct Missing: Error, CustomStringConvertible {
        var description: String { "the OpenAPI document (openapi.json) is missing from the build" }
    }
}

extension RESTAPI {
    /// `GET /openapi.json`: public, cacheable, the same bytes as the committed document.
    func addOpenAPIRoute(_ router: Router<BrokerRequestContext>) {
        router.get("/openapi.json") { request, _ in
            let bytes = try OpenAPIDocument.bytes.get()
            return Response(
                status: .ok,
                headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "public, max-age=300"],
                body: .init(byteBuffer: ByteBuffer(bytes: bytes))
            )
        }
        routes.record(.get, "/openapi.json")
    }
}
