import Foundation
import Testing

/// The OpenAPI document (`Sources/Gateway/REST/openapi.json`) and the routes the broker serves describe each
/// other exactly: a route the document lacks, or an operation no route serves, fails here.
@Suite("The OpenAPI contract", .timeLimit(.minutes(3)))
struct OpenAPIContractTests {
    static let file = DeployKitTests.repository.appendingPathComponent("Sources/Gateway/REST/openapi.json")

    /// The document's operations as `METHOD /path`.
    static func documented(_ data: Data) throws -> Set<String> {
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(document["openapi"] as? String == "3.1.0")
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "options", "head", "trace"]
        return Set(
            paths.flatMap { path, item in
                item.keys.filter(methods.contains).map { "\($0.uppercased()) \(path)" }
            }
        )
    }

    @Test("Every route is in the document and every operation of the document is a route; /openapi.json serves it")
    func documentMatchesRoutes() async throws {
        let committed = try Data(contentsOf: Self.file)
        let documented = try Self.documented(committed)
        try await TestBroker.run { broker in
            let served = broker.application.routes.all
            #expect(served.count > 40, "\(served.sorted())")
            let undocumented = served.subtracting(documented).sorted()
            let unserved = documented.subtracting(served).sorted()
            #expect(undocumented.isEmpty, "routes the document does not describe: \(undocumented)")
            #expect(unserved.isEmpty, "operations of the document no route serves: \(unserved)")
            let answer = try await broker.send(.GET, "/openapi.json", user: nil)
            #expect(answer.status == 200 && answer.headers["content-type"].first?.hasPrefix("application/json") == true)
            #expect(answer.body == committed)
        }
    }
}
