import Crypto
import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// `Idempotency-Key` on the admin API's creating `POST`s: a retried request with the same key (from the same
/// caller) gets the first answer again, marked `Idempotent-Replayed: true`, and writes nothing again; the same key
/// with another request is refused (422), and one whose first request is still running gets 409.
///
/// Only answers of 2xx are kept: a request that failed may be retried with its key. A process that dies between the
/// write and keeping its answer leaves a claim that ends after a minute; the retry then runs again (and meets the
/// first run's result: a 409 for a user or tenant that now exists).
struct Idempotency: Sendable {
    let store: any IdempotencyStore
    let maxBodySize: Int

    func run(
        _ request: Request,
        actor: AdminActor,
        _ handler: @Sendable (Request) async throws -> Response
    ) async throws -> Response {
        guard request.method == .post, let key = request.headers[.idempotencyKey] else {
            return try await handler(request)
        }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Problem.badRequest("Idempotency-Key must be 1-255 visible ASCII characters", code: "invalid-request")
        }
        var request = request
        let body = try await request.collectBody(upTo: maxBodySize)
        var hasher = SHA256()
        hasher.update(data: Data("\(request.method.rawValue) \(request.uri.path)?\(request.uri.query ?? "")\n".utf8))
        hasher.update(data: Data(body.readableBytesView))
        let hash = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        // The account, not only its name: an account deleted and made again under the name does not replay the
        // first one's answers (which may hold a secret shown once).
        let scope = "\(actor.role.rawValue):\(actor.tenant?.rawValue ?? "*"):\(actor.name):\(actor.account ?? "")"
        let reused = Problem(
            .unprocessableContent,
            "idempotency-key-reused",
            "this Idempotency-Key was used for another request"
        )
        switch try await store.claimIdempotencyKey(scope: scope, key: key, requestHash: hash, at: Date()) {
        case .answered(let first, let response):
            guard first == hash else { throw reused }
            return Self.response(response, replayed: true)
        case .inProgress(let first):
            guard first == hash else { throw reused }
            throw Problem.retryLater(
                .conflict,
                "idempotency-key-in-progress",
                "a request with this Idempotency-Key is still running",
                after: .seconds(1)
            )
        case .claimed:
            let answer: Response
            do {
                answer = try await handler(request)
            } catch {
                try? await store.releaseIdempotencyKey(scope: scope, key: key)
                throw error
            }
            guard (200..<300).contains(answer.status.code) else {
                try? await store.releaseIdempotencyKey(scope: scope, key: key)
                return answer
            }
            let kept = IdempotentResponse(
                status: answer.status.code,
                contentType: answer.headers[.contentType],
                location: answer.headers[.location],
                body: try await Self.bytes(of: answer)
            )
            try await store.completeIdempotencyKey(scope: scope, key: key, response: kept)
            return Self.response(kept, replayed: false)
        }
    }

    static func response(_ kept: IdempotentResponse, replayed: Bool) -> Response {
        var headers = HTTPFields()
        if let type = kept.contentType { headers[.contentType] = type }
        if let location = kept.location { headers[.location] = location }
        if replayed { headers[.idempotentReplayed] = "true" }
        return Response(
            status: HTTPResponse.Status(code: kept.status),
            headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: kept.body))
        )
    }

    /// The bytes a response's body writes.
    static func bytes(of response: Response) async throws -> [UInt8] {
        let collected = Collected()
        try await response.body.write(Collector(into: collected))
        return collected.bytes.withLock { $0 }
    }

    private final class Collected: Sendable {
        let bytes = Mutex<[UInt8]>([])
    }

    private struct Collector: ResponseBodyWriter {
        let into: Collected
        mutating func write(_ buffer: ByteBuffer) async throws {
            into.bytes.withLock { $0 += buffer.readableBytesView }
        }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

extension HTTPField.Name {
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}
