import Foundation
import TestSupport
import Testing

/// Each operation of the OpenAPI document lists the problems it can answer, status by status with their codes
/// (no catch-all `default`), so that a client can generate its error handling; answers of the real server fall
/// within them. The fuzzer (`scripts/fuzz-api`) checks every answer of its run the same way.
@Suite("The OpenAPI document's problems per operation", .timeLimit(.minutes(2)))
struct OpenAPIProblemsTests {
    /// The documented problem codes of each operation (`METHOD /path`), by status.
    static func problems() throws -> [String: [String: [String]]] {
        let data = try Data(contentsOf: OpenAPIContractTests.file)
        let document = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: [String: Any]]])
        var result: [String: [String: [String]]] = [:]
        for (path, item) in paths {
            for (method, operation) in item {
                let responses = operation["responses"] as? [String: [String: Any]] ?? [:]
                var byStatus: [String: [String]] = [:]
                for (status, response) in responses where !status.hasPrefix("2") {
                    let content = response["content"] as? [String: [String: Any]]
                    let schema = content?["application/problem+json"]?["schema"] as? [String: Any]
                    let parts = schema?["allOf"] as? [[String: Any]] ?? []
                    let type = parts.compactMap { ($0["properties"] as? [String: Any])?["type"] as? [String: Any] }
                        .first
                    let codes = (type?["enum"] as? [String] ?? []).map {
                        String($0.dropFirst("urn:impulse-broker:problem:".count))
                    }
                    byStatus[status] = codes
                }
                result["\(method.uppercased()) \(path)"] = byStatus
            }
        }
        return result
    }

    @Test("No operation has a catch-all; each lists its problem statuses with their codes")
    func listed() throws {
        let problems = try Self.problems()
        #expect(problems.count > 70)
        for (operation, byStatus) in problems {
            #expect(byStatus["default"] == nil, "\(operation)")
            #expect(byStatus["400"]?.contains("invalid-query") == true, "\(operation)")
            #expect(byStatus["503"]?.contains("storage-unavailable") == true, "\(operation)")
            for (status, codes) in byStatus
            where status != "416" && !(status == "422" && operation.hasSuffix("user-imports")) {
                #expect(!codes.isEmpty, "\(operation) \(status)")
            }
        }
        #expect(problems["GET /v1/me"]?["401"] == ["unauthorized"])
        #expect(problems["GET /health/live"]?["401"] == nil)
        #expect(problems["POST /t/{tenant}/admin/v1/users"]?["409"]?.contains("conflict") == true)
        #expect(problems["PUT /v1/me/preferences"]?["415"] == ["unsupported-media-type"])
        #expect(problems["GET /v1/me"]?["415"] == nil)
    }

    @Test("What the server answers is among what the operation lists")
    func answersAreListed() async throws {
        let problems = try Self.problems()
        try await TestBroker.run { broker in
            let json = [("Content-Type", "application/json")]
            let asOperator = AdminAPITests.bearer + json
            let cases: [(operation: String, reply: TestBroker.Reply)] = [
                ("GET /v1/me", try await broker.send(.GET, "/v1/me", user: nil)),
                ("GET /v1/impulses", try await broker.send(.GET, "/v1/impulses?limit=0")),
                ("GET /t/{tenant}/v1/me", try await broker.send(.GET, "/t/nowhere/v1/me")),
                ("PUT /v1/me/preferences", try await broker.send(.PUT, "/v1/me/preferences", headers: json, body: "{")),
                (
                    "PUT /v1/me/preferences",
                    try await broker.send(
                        .PUT,
                        "/v1/me/preferences",
                        headers: json,
                        body: #"{"timeZone": "Mars/Base"}"#
                    )
                ),
                (
                    "PUT /v1/me/preferences",
                    try await broker.send(
                        .PUT,
                        "/v1/me/preferences",
                        headers: [("Content-Type", "text/plain")],
                        body: "{}"
                    )
                ),
                ("GET /SendPush", try await broker.send(.GET, "/SendPush")),
                (
                    "POST /t/{tenant}/admin/v1/users",
                    try await broker.send(
                        .POST,
                        "/t/acme/admin/v1/users",
                        user: nil,
                        headers: asOperator,
                        body: #"{"username": "alice", "password": "pw"}"#
                    )
                ),
                (
                    "POST /t/{tenant}/admin/v1/users",
                    try await broker.send(
                        .POST,
                        "/t/acme/admin/v1/users",
                        user: nil,
                        headers: asOperator,
                        body: #"{"username": "zed", "password": "pw", "timezone": "UTC"}"#
                    )
                ),
                (
                    "GET /t/{tenant}/admin/v1/users/{username}",
                    try await broker.send(.GET, "/t/acme/admin/v1/users/nobody", user: nil, headers: asOperator)
                ),
                (
                    "GET /admin/v1/tenants/{id}",
                    try await broker.send(.GET, "/admin/v1/tenants/nowhere", user: nil, headers: asOperator)
                ),
            ]
            for (operation, reply) in cases {
                let code = (reply.json["type"] as? String)?.split(separator: ":").last.map(String.init) ?? "?"
                let listed = problems[operation]?["\(reply.status)"] ?? []
                #expect(
                    reply.status >= 400 && listed.contains(code),
                    "\(operation): \(reply.status) \(code), listed \(listed)"
                )
            }
        }
    }
}
