import HTTPTypes
import Hummingbird
import NIOCore

/// Reads an HTTP/1.1 request's body whole, within a deadline, before the route runs (nginx's
/// `client_body_timeout`, Go's `ReadTimeout`): the route's work then reads a buffer, never the connection, so no
/// work that outlives its answer (`RequestDeadline`) can still be reading a body while Hummingbird drains it for
/// the next request (two readers of one connection is a trap, even in release builds).
///
/// A body that has not arrived in time is answered 408 and the connection is closed instead of drained. Over
/// HTTP/2 the engine hands requests up with their bodies whole, except the streamed routes, and those read
/// theirs through a ``BodyGate`` under the upload deadline.
struct RequestBodyDeadlineMiddleware: RouterMiddleware {
    /// The largest body any route that reads it whole accepts; more is 413.
    let limit: Int
    let deadline: Duration
    /// The routes that read their body as it arrives (`StreamedRoutes`).
    let streamed: @Sendable (String) -> Bool

    func handle(
        _ request: Request,
        context: BrokerRequestContext,
        next: (Request, BrokerRequestContext) async throws -> Response
    ) async throws -> Response {
        guard !context.http2, Self.hasBody(request.headers), !streamed(request.uri.path) else {
            return try await next(request, context)
        }
        var request = request
        request.body = RequestBody(buffer: try await Self.collect(request.body, upTo: limit, within: deadline, context))
        return try await next(request, context)
    }

    /// Whether an HTTP/1.1 request has a body to read (RFC 9112, section 6.3: a length or a transfer coding).
    static func hasBody(_ headers: HTTPFields) -> Bool {
        headers[.transferEncoding] != nil || (headers[.contentLength].map { $0 != "0" } ?? false)
    }

    /// The whole body, or 408 when it has not arrived within `deadline` (the reading is cancelled and has ended
    /// when this throws; the connection closes after the answer).
    static func collect(
        _ body: RequestBody,
        upTo limit: Int,
        within deadline: Duration,
        _ context: BrokerRequestContext
    ) async throws -> ByteBuffer {
        let collected = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await body.collect(upTo: limit) }
            group.addTask {
                try await Task.sleep(for: deadline)
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let collected else {
            closeAfterAnswer(context)
            throw Problem(
                .requestTimeout,
                "body-timeout",
                "the request body did not arrive within \(deadline.components.seconds) seconds",
                headers: [.connection: "close"]
            )
        }
        return collected
    }

    /// Asks an HTTP/1.1 connection to close once its answer is written (Hummingbird's connection handler closes
    /// a quiescing connection after its last response) rather than read what is left of a late body.
    static func closeAfterAnswer(_ context: BrokerRequestContext) {
        guard !context.http2 else { return }
        context.channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
    }
}
