import Engine
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension AdminAPI {
    /// `POST /t/{tenant}/admin/v1/user-imports`: users from CSV or JSON lines, read as they arrive.
    func addImportRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        tenantResource(
            router,
            "/user-imports",
            api: api,
            scheme: scheme,
            streamed: true,
            [
                .post: { request, _, actor, tenant in
                    let format = try Self.importFormat(request)
                    let modeText = request.uri.queryParameters["mode"].map(String.init) ?? "per-row"
                    guard let mode = UserImportMode(rawValue: modeText) else {
                        throw Problem.badRequest("mode must be per-row or all-or-nothing", code: "invalid-query")
                    }
                    let start = try request.uri.queryParameters["firstDelivery"].map { text in
                        guard let value = FirstDelivery(rawValue: String(text)) else {
                            throw Problem.badRequest(
                                "firstDelivery must be next-delivery-time or immediate",
                                code: "invalid-query"
                            )
                        }
                        return value
                    }
                    let rows = ImportRows(
                        body: request.body,
                        parser: UserImportParser(format: format),
                        limit: api.configuration.maxUploadSize
                    )
                    let report = try await administration.importUsers(
                        tenant: tenant.id,
                        rows: rows,
                        mode: mode,
                        firstDelivery: start,
                        by: actor
                    ) { updated in
                        // As each batch commits: an import cut short (413, a reset) has written what it wrote.
                        await changed(tenant.id, updated.map { .credentials(username: $0) })
                    }
                    guard report.committed else {
                        return try Self.refusedImport(report, request: request)
                    }
                    return try Representation.response(report, for: request)
                }
            ]
        )
    }

    static func importFormat(_ request: Request) throws -> UserImportParser.Format {
        let type = request.headers[.contentType]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        switch type {
        case "text/csv": return .csv
        case "application/x-ndjson", "application/jsonl", "application/jsonlines", "application/x-jsonlines":
            return .jsonLines
        default:
            throw Problem(
                .unsupportedMediaType,
                "unsupported-media-type",
                "send the users as text/csv or application/x-ndjson (JSON lines)"
            )
        }
    }

    /// An all-or-nothing import with rejected rows: 422, a problem that carries the report.
    static func refusedImport(_ report: UserImportReport, request: Request) throws -> Response {
        struct Body: Encodable {
            var type = "urn:impulse-broker:problem:import-rejected"
            var title = "Unprocessable Content"
            var status = 422
            var detail: String
            var instance: String
            var report: UserImportReport
        }
        let body = Body(
            detail: "\(report.rejected) rows were rejected; nothing was written",
            instance: request.uri.path,
            report: report
        )
        return Response(
            status: .unprocessableContent,
            headers: [.contentType: "application/problem+json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(body)))
        )
    }
}

/// The rows of an import body as it arrives: each part fed to the parser, at most `limit` bytes (413 beyond,
/// on HTTP/1.1 too, where the engine's limit does not apply).
struct ImportRows: AsyncSequence, Sendable {
    typealias Element = Result<UserImportRow, UserImportRowError>

    let body: RequestBody
    let parser: UserImportParser
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var parts: RequestBody.AsyncIterator
        var parser: UserImportParser
        let limit: Int
        var read = 0
        var ready: [Element] = []
        var finished = false

        mutating func next() async throws -> Element? {
            while ready.isEmpty {
                if finished { return nil }
                if let part = try await parts.next() {
                    read += part.readableBytes
                    guard read <= limit else {
                        throw Problem(.contentTooLarge, "body-too-large", "the import is larger than \(limit) bytes")
                    }
                    ready = parser.feed(part.readableBytesView).reversed()
                } else {
                    finished = true
                    ready = parser.finish().reversed()
                }
            }
            return ready.popLast()
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(parts: body.makeAsyncIterator(), parser: parser, limit: limit)
    }
}
