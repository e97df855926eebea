import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus

/// Where the operator's endpoints listen, and the bearer token they may require.
public struct AdminConfiguration: Sendable {
    /// Loopback only by default: the endpoints show tenant names and live state.
    public var listen: ListenAddress
    /// When set, requests need `Authorization: Bearer <token>`.
    public var token: String?

    public init(listen: ListenAddress = ListenAddress(host: "127.0.0.1", port: 9090), token: String? = nil) {
        self.listen = listen
        self.token = token
    }
}

/// The admin listener's routes: `GET /metrics` (Prometheus text), `GET /inspect` (JSON), and the probes
/// `GET /health` (readiness) and `GET /health/live` (liveness), so that probes need not use the public listener.
struct AdminRoutes: Sendable {
    let registry: PrometheusCollectorRegistry
    let collector: MetricsCollector
    let inspector: Inspector
    let readiness: Readiness
    let token: String?

    func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: ProblemMiddleware())
        router.get("/metrics") { request, _ -> Response in
            try authorize(request)
            await collector.refresh()
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer))
            )
        }
        // The probes answer without the token: a kubelet or load balancer has none, and they tell nothing secret.
        router.get("/health") { request, context in try await readiness.response(request, context: context) }
        router.get("/health/live") { _, _ in Readiness.live() }
        router.get("/inspect") { request, _ -> Response in
            try authorize(request)
            return try Representation.response(try await inspector.view(), for: request)
        }
        return router
    }

    private func authorize(_ request: Request) throws {
        guard let token else { return }
        guard BearerToken(token).matches(request.headers[.authorization]) else {
            throw Problem(
                .unauthorized,
                "unauthorized",
                "a bearer token is required",
                headers: [.wwwAuthenticate: "Bearer"]
            )
        }
    }
}
