import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// An error answered with an RFC 9457 problem body. Every error leaving a route becomes one (`ProblemMiddleware`).
public struct Problem: Error, HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    /// A stable slug; the problem's `type` is `urn:impulse-broker:problem:<code>`.
    public var code: String
    public var detail: String
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ detail: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = self.headers
        headers[.contentType] = "application/problem+json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: try body(instance: request.uri.path)))
    }

    /// The RFC 9457 body; without `instance` when there is none (answers encoded once for any request).
    func body(instance: String?) throws -> ByteBuffer {
        let body = ProblemBody(
            type: "urn:impulse-broker:problem:\(code)",
            title: status.reasonPhrase,
            status: status.code,
            detail: detail,
            instance: instance
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ByteBuffer(bytes: try encoder.encode(body))
    }

    static func badRequest(_ detail: String, code: String = "invalid-request") -> Problem {
        Problem(.badRequest, code, detail)
    }

    static func notFound(_ detail: String = "no such resource") -> Problem {
        Problem(.notFound, "not-found", detail)
    }

    /// A 429 or 503 with `Retry-After` in whole seconds (at least one).
    static func retryLater(
        _ status: HTTPResponse.Status,
        _ code: String,
        _ detail: String,
        after: Duration
    ) -> Problem {
        let seconds = max(1, Int((Double(after.components.seconds) + 0.999).rounded(.down)))
        return Problem(status, code, detail, headers: [.retryAfter: String(seconds)])
    }
}

/// RFC 9457 members.
struct ProblemBody: Encodable {
    var type: String
    var title: String
    var status: Int
    var detail: String
    var instance: String?
}

extension Problem {
    /// Runs validation, answering its failure as a problem (usually 422).
    static func validating<T>(_ body: () throws(EngineError) -> T) throws -> T {
        do throws(EngineError) {
            return try body()
        } catch {
            throw Problem(error)
        }
    }

    /// The one place where Engine errors become HTTP answers.
    init(_ error: EngineError) {
        switch error.code {
        case .invalidInput: self.init(.unprocessableContent, "invalid-input", error.message)
        case .notFound: self.init(.notFound, "not-found", error.message)
        case .unknownTenant: self.init(.notFound, "unknown-tenant", error.message)
        case .conflict: self.init(.conflict, "conflict", error.message)
        case .forbidden: self.init(.forbidden, "forbidden", error.message)
        case .tooLarge: self.init(.contentTooLarge, "too-large", error.message)
        case .unsupportedType: self.init(.unsupportedMediaType, "unsupported-media-type", error.message)
        default:
            self.init(
                .serviceUnavailable,
                "storage-unavailable",
                "the broker cannot reach its store; try again later",
                headers: [.retryAfter: "5"]
            )
        }
    }
}

/// Turns every error a route throws into a problem body, and logs server-side failures once.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let problem as Problem {
            if problem.status.code >= 500 {
                context.logger.error("request failed", metadata: ["problem.code": "\(problem.code)"])
            }
            return try problem.response(from: request, context: context)
        } catch let error as EngineError {
            let problem = Problem(error)
            if problem.status.code >= 500 {
                context.logger.error(
                    "request failed",
                    metadata: ["problem.code": "\(problem.code)", "error": "\(error)"]
                )
            }
            return try problem.response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            let code =
                error.status == .notFound
                ? "not-found" : error.status == .contentTooLarge ? "body-too-large" : "http-error"
            let detail = error.status == .notFound ? "no such resource" : error.status.reasonPhrase
            return try Problem(error.status, code, detail).response(from: request, context: context)
        } catch {
            context.logger.error("unexpected failure", metadata: ["error.type": "\(type(of: error))"])
            return try Problem(.internalServerError, "internal", "the broker failed to answer").response(
                from: request,
                context: context
            )
        }
    }
}
