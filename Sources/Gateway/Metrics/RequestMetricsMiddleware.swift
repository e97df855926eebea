import Engine
import Hummingbird

/// Counts REST requests by route template, method and status, and times them by route template.
///
/// The route is Hummingbird's matched path template (`/v1/impulses/{impulse}`), never the concrete path, so the
/// label set is closed; an unmatched path is `unmatched`.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: BrokerMetrics
    static var methods: Set<String> { ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let started = ContinuousClock.now
        let status: Int
        do {
            let response = try await next(request, context)
            status = Int(response.status.code)
            record(request, context, status: status, since: started)
            return response
        } catch let error as any HTTPResponseError {
            record(request, context, status: Int(error.status.code), since: started)
            throw error
        } catch {
            record(request, context, status: 500, since: started)
            throw error
        }
    }

    private func record(_ request: Request, _ context: Context, status: Int, since started: ContinuousClock.Instant) {
        let route = context.endpointPath ?? "unmatched"
        let method = Self.methods.contains(request.method.rawValue) ? request.method.rawValue : "other"
        metrics.counter(
            BrokerMetrics.Name.restRequests,
            [("route", route), ("method", method), ("status", String(status))]
        ).increment()
        let elapsed = started.duration(to: .now).components
        metrics.timer(BrokerMetrics.Name.restDuration, [("route", route)])
            .recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
    }
}
