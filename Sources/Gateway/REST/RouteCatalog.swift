import HTTPTypes
import Hummingbird
import Synchronization

/// Every route the routers serve, by path template and method: the operations a test holds the OpenAPI document
/// to (`METHOD /path`, `{param}` for a path parameter), and the methods a path allows when a request uses another
/// (405 with `Allow`, whatever the method: `TRACE`, `QUERY` or one nobody has heard of).
public final class RouteCatalog: Sendable {
    private let methods = Mutex<[String: Set<String>]>([:])

    public init() {}

    /// Records a route of the router (Hummingbird's form: `:param`, `**` for the rest of the path).
    func record(_ method: HTTPRequest.Method, _ path: String) {
        let template = path.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            if segment.hasPrefix(":") { return "{" + segment.dropFirst() + "}" }
            if segment == "**" { return "{path}" }
            return String(segment)
        }.joined(separator: "/")
        methods.withLock { _ = $0[template, default: []].insert(method.rawValue) }
    }

    /// The operations, `METHOD /path`: `HEAD` (answered for every `GET`) and `OPTIONS` are not operations of their own.
    public var all: Set<String> {
        methods.withLock { table in
            Set(
                table.flatMap { template, methods in
                    methods.subtracting(["HEAD", "OPTIONS"]).map { "\($0) \(template)" }
                }
            )
        }
    }

    /// The methods some route takes at `path` (with `HEAD` for `GET`), or nil when no route has the path.
    func allowed(at path: String) -> [String]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        let found = methods.withLock { table in
            table.filter { Self.matches($0.key, segments) }.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        }
        guard !found.isEmpty else { return nil }
        return (found.contains("GET") ? found.union(["HEAD"]) : found).sorted()
    }

    private static func matches(_ template: String, _ segments: [Substring]) -> Bool {
        let parts = template.split(separator: "/", omittingEmptySubsequences: false)
        if parts.last == "{path}" {
            return segments.count >= parts.count && zip(parts.dropLast(), segments).allSatisfy(Self.matches)
                && !segments[parts.count - 1].isEmpty
        }
        return parts.count == segments.count && zip(parts, segments).allSatisfy(Self.matches)
    }

    private static func matches(_ part: Substring, _ segment: Substring) -> Bool {
        part.hasPrefix("{") ? !segment.isEmpty : part == segment
    }
}

/// A request whose path has routes, but none for its method, is answered 405 with `Allow` (RFC 9110 section
/// 15.5.6) instead of the router's 404.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let routes: RouteCatalog

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // The router's own "no route" (a route's 404 is a `Problem`).
            guard let allowed = routes.allowed(at: request.uri.path) else { throw error }
            throw Problem(
                .methodNotAllowed,
                "method-not-allowed",
                "\(request.method.rawValue) is not allowed here",
                headers: [.allow: allowed.joined(separator: ", ")]
            )
        }
    }
}
