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

    /// What a strict body of `schema` may hold (the members its `properties` name), nested objects included.
    static func shape(of schema: String) -> Shape? { schemaShapes[schema] }

    /// An object schema's members, and the shapes of those members that are objects with a closed set of their own
    /// (`additionalProperties: false`), or arrays of such objects: `learnedTiming` inside a tenant's settings.
    struct Shape: Sendable {
        var members: Set<String>
        var nested: [String: Shape]
    }

    private static let schemaShapes: [String: Shape] = {
        guard case .success(let bytes) = bytes,
            let document = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
            let components = document["components"] as? [String: Any],
            let schemas = components["schemas"] as? [String: Any]
        else { return [:] }
        // A member's schema, through a `$ref` and an array's items; nil for anything but an object with properties.
        // The depth bound stops a schema that refers to itself.
        func shape(_ node: [String: Any], closedOnly: Bool, depth: Int) -> Shape? {
            guard depth < 8 else { return nil }
            var node = node
            if let reference = node["$ref"] as? String, let name = reference.split(separator: "/").last,
                let target = schemas[String(name)] as? [String: Any]
            {
                node = target
            }
            if node["type"] as? String == "array", let items = node["items"] as? [String: Any] {
                return shape(items, closedOnly: closedOnly, depth: depth + 1)
            }
            guard let properties = node["properties"] as? [String: Any],
                !closedOnly || node["additionalProperties"] as? Bool == false
            else { return nil }
            var nested: [String: Shape] = [:]
            for (member, schema) in properties {
                if let schema = schema as? [String: Any], let inner = shape(schema, closedOnly: true, depth: depth + 1)
                {
                    nested[member] = inner
                }
            }
            return Shape(members: Set(properties.keys), nested: nested)
        }
        return schemas.compactMapValues { schema in
            (schema as? [String: Any]).flatMap { shape($0, closedOnly: false, depth: 0) }
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
