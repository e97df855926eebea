import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The client REST API: the original endpoints and `/v1`, each under `/t/{tenant}/` and, for the default
/// tenant, unprefixed. Routes authenticate, then talk to the ledger and the token registry.
public struct RESTAPI: Sendable {
    let tenants: TenantDirectory
    let authenticator: Authenticator
    let ledger: DeliveryLedger
    let registry: TokenRegistry
    let store: any BrokerStore
    let configuration: RESTConfiguration
    let pushGateway: PushGateway?
    let metrics: BrokerMetrics
    /// Answers a tenant admin's `GET /v1/admin/inspect`; nil when there is nothing to inspect.
    let inspector: Inspector?
    /// Whether this node should get traffic (`GET /health`).
    let readiness: Readiness
    let failures = FailureInjector()
    /// Tokens of the `/SendPush` forms.
    let csrf = CSRFTokens()
    /// Encoded answers of `GET /CurrentImpulse`, reused while a user's page is unchanged.
    let representations = RepresentationCache()
    /// Requests in progress, node-wide (shared by every listener's router).
    let admission: AdmissionControl
    /// Fewer streams per HTTP/2 connection while admission control is full.
    let streamGovernor = StreamGovernor(normal: 100, throttled: 4)
    /// What the application mounts beside the app's API: the admin API (`/admin/v1`, `/t/{tenant}/admin/v1`) and
    /// the web console (`/console`, `/t/{tenant}/console`).
    var mounts: [any RouteMount] = []
    /// The administration `/SendPush` delivers through; nil answers its send command 404.
    var administration: Administration?
    /// Every operation the router serves (for the test that holds the OpenAPI document to them).
    let routes = RouteCatalog()

    public init(
        tenants: TenantDirectory,
        authenticator: Authenticator,
        ledger: DeliveryLedger,
        registry: TokenRegistry,
        store: any BrokerStore,
        configuration: RESTConfiguration,
        pushGateway: PushGateway? = nil,
        metrics: BrokerMetrics = .disabled,
        inspector: Inspector? = nil
    ) {
        self.tenants = tenants
        self.authenticator = authenticator
        self.ledger = ledger
        self.registry = registry
        self.store = store
        self.configuration = configuration
        self.pushGateway = pushGateway
        self.metrics = metrics
        self.inspector = inspector
        self.readiness = Readiness(store: store)
        self.admission = AdmissionControl(
            limits: configuration.admission,
            governor: streamGovernor,
            clock: configuration.clock
        )
    }

    /// The caller of an authenticated route.
    struct Caller {
        var tenant: Tenant
        var user: User
        /// `/t/{tenant}` when the request used it, else empty: links keep the caller's form.
        var prefix: String
        var baseURL: String
    }

    typealias Handler = @Sendable (Request, BrokerRequestContext, Caller) async throws -> Response

    /// Builds the router for one listener; `scheme` is what that listener speaks (for derived absolute URLs).
    public func router(scheme: String) -> Router<BrokerRequestContext> {
        let router = Router(context: BrokerRequestContext.self, options: [.autoGenerateHeadEndpoints])
        router.add(middleware: RequestLogMiddleware())
        router.add(middleware: RequestMetricsMiddleware(metrics: metrics))
        router.add(middleware: ProblemMiddleware())
        router.add(middleware: MethodNotAllowedMiddleware(routes: routes))
        router.add(middleware: AdmissionMiddleware(control: admission))
        router.add(
            middleware: RequestBodyDeadlineMiddleware(
                limit: max(configuration.maxBodySize, mounts.map(\.maxBodySize).max() ?? 0),
                deadline: configuration.bodyDeadline,
                streamed: StreamedRoutes.matches
            )
        )
        if scheme == "https" { router.add(middleware: StrictTransportSecurityMiddleware()) }
        // Readiness (the store takes a write, the node is not stopping) and liveness, for load balancers.
        router.get("/health") { [readiness] request, context in try await readiness.response(request, context: context)
        }
        router.get("/health/live") { _, _ in Readiness.live() }
        routes.record(.get, "/health")
        routes.record(.get, "/health/live")
        addOpenAPIRoute(router)
        addOriginalRoutes(router, scheme: scheme)
        addVersionedRoutes(router, scheme: scheme)
        addMediaRoutes(router)
        addAdminRoutes(router, scheme: scheme)
        for mount in mounts { mount.addRoutes(router, api: self, scheme: scheme) }
        return router
    }

    /// Registers an authenticated resource under both prefixes, with 405 + `Allow` for every other method.
    func resource(
        _ router: Router<BrokerRequestContext>,
        _ path: String,
        scheme: String,
        _ handlers: [HTTPRequest.Method: Handler]
    ) {
        var allowed = Set(handlers.keys)
        if allowed.contains(.get) { allowed.insert(.head) }
        allowed.insert(.options)
        let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
        for prefix in ["", "/t/:tenant"] {
            for (method, handler) in handlers {
                routes.record(method, prefix + path)
                router.on(RouterPath(prefix + path), method: method) { request, context in
                    try await underDeadline(request, context) { request in
                        let caller = try await self.caller(request, context, scheme: scheme)
                        return try await handler(request, context, caller)
                    }
                }
            }
            routes.record(.options, prefix + path)
            router.on(RouterPath(prefix + path), method: .options) { _, _ in
                Response(status: .noContent, headers: [.allow: allow])
            }
        }
    }

    /// Runs an authenticated request's work within `requestDeadline`: past it the client gets 503 with
    /// `Retry-After`, and the work goes on, holding its admission slot until it ends. Its body was read whole
    /// before (`RequestBodyDeadlineMiddleware`).
    ///
    /// A `streamed` request's work reads its body as it arrives, through a ``BodyGate``: past the deadline the work
    /// is cancelled and its reading taken back before the answer (408 while the body was still arriving), and a
    /// body the work left unread is not read after the answer either: the connection closes (HTTP/1.1) or the
    /// stream is reset (HTTP/2).
    func underDeadline(
        _ request: Request,
        _ context: BrokerRequestContext,
        limit: Duration? = nil,
        streamed: Bool = false,
        _ work: @escaping @Sendable (Request) async throws -> Response
    ) async throws -> Response {
        let tenant = AdmissionControl.tenant(ofPath: request.uri.path)
        return try await Self.withDeadline(
            request,
            context,
            limit: limit ?? configuration.requestDeadline,
            streamed: streamed,
            abandoned: { admission.hold(tenant: tenant) },
            finishedLate: { admission.release(tenant: tenant) },
            work
        )
    }

    /// ``underDeadline(_:_:limit:streamed:_:)`` without admission control's bookkeeping (the console's upload).
    static func withDeadline(
        _ request: Request,
        _ context: BrokerRequestContext,
        limit: Duration,
        streamed: Bool,
        abandoned: @escaping @Sendable () -> Void = {},
        finishedLate: @escaping @Sendable () -> Void = {},
        _ work: @escaping @Sendable (Request) async throws -> Response
    ) async throws -> Response {
        var request = request
        // Over HTTP/1.1 a request without a body (a DELETE) has nothing to take back.
        let arriving = context.http2 || RequestBodyDeadlineMiddleware.hasBody(request.headers)
        let channel = context.channel
        let gate =
            !streamed || !arriving
            ? nil
            : context.http2
                ? BodyGate(request.body)
                : BodyGate(
                    request.body,
                    statedLength: request.headers[.contentLength].flatMap { Int($0) },
                    connected: { channel.isActive }
                )
        if let gate { request.body = gate.body }
        do {
            var response = try await RequestDeadline(limit: limit).run(
                on: context.eventLoop,
                executor: context.executor,
                gate: gate,
                abandoned: abandoned,
                finishedLate: finishedLate,
                { [request] in try await work(request) }
            )
            if await leaveUnread(gate, context) { response.headers[.connection] = "close" }
            return response
        } catch is RequestDeadline.Exceeded {
            if let gate, !gate.ended {
                RequestBodyDeadlineMiddleware.closeAfterAnswer(context)
                throw Problem(
                    .requestTimeout,
                    "upload-timeout",
                    "the upload did not finish within \(limit.components.seconds) seconds",
                    headers: [.connection: "close"]
                )
            }
            throw Problem.retryLater(
                .serviceUnavailable,
                "storage-unavailable",
                "the broker could not finish the request in time; try again later",
                after: .seconds(5)
            )
        } catch var problem as Problem {
            if await leaveUnread(gate, context) { problem.headers[.connection] = "close" }
            throw problem
        } catch {
            await leaveUnread(gate, context)
            throw error
        }
    }

    /// A streamed body the work did not read to its end (a refusal before the last byte) is not read after the
    /// answer: no drain of up to `maxUploadSize` for an answer already given.
    /// True when the connection closes after the answer (which then says `Connection: close`, so that a client
    /// does not send its next request on it).
    @discardableResult
    static func leaveUnread(_ gate: BodyGate?, _ context: BrokerRequestContext) async -> Bool {
        guard let gate, !gate.ended else { return false }
        await gate.close()
        RequestBodyDeadlineMiddleware.closeAfterAnswer(context)
        return !context.http2
    }

    private func caller(_ request: Request, _ context: BrokerRequestContext, scheme: String) async throws -> Caller {
        let segment = context.parameters.get("tenant")
        let tenant = try await tenants.resolve(segment)
        let address = ClientAddress.of(request, context, scheme: scheme, trustedProxies: configuration.trustedProxies)
        let user = try await authenticator.authenticate(
            request.headers[.authorization],
            tenant: tenant,
            address: address,
            logger: context.logger
        )
        let base = baseURL(for: request, scheme: scheme)
        return Caller(tenant: tenant, user: user, prefix: segment.map { "/t/\($0)" } ?? "", baseURL: base)
    }

    /// What makes `/media/...` URLs absolute: `publicBaseURL`, or this request's scheme and authority.
    func baseURL(for request: Request, scheme: String) -> String {
        configuration.publicBaseURL ?? "\(scheme)://\(request.head.authority ?? "localhost")"
    }

    /// Reads and decodes a JSON body within the size limit; a syntax or type error is a 400 that names the member.
    func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        if let contentType = request.headers[.contentType]?.lowercased(), !contentType.contains("json") {
            throw Problem(.unsupportedMediaType, "unsupported-media-type", "send the body as application/json")
        }
        let buffer = try await request.body.collect(upTo: configuration.maxBodySize)
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw Problem.badRequest("malformed body: \(CatalogImport.describe(error))", code: "malformed-body")
        } catch let error as EngineError {
            throw Problem(error)
        }
    }

    /// Reads the body of an original route (`POST /RegisterToken`). The first app sent its JSON without a JSON
    /// content type (NSURLConnection labels a body `application/x-www-form-urlencoded` unless told otherwise), so
    /// these routes read JSON under that type, `text/plain` or none at all, and also take real form fields
    /// (`DeviceToken=...&DeviceName=...`). Any other type is 415. The `/v1` routes want `application/json`.
    func decodeOriginal<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        let contentType = request.headers[.contentType]?.lowercased()
        let mediaType = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
        let form = mediaType == "application/x-www-form-urlencoded"
        guard mediaType == nil || mediaType?.contains("json") == true || form || mediaType == "text/plain" else {
            throw Problem(
                .unsupportedMediaType,
                "unsupported-media-type",
                "send the body as JSON (application/json) or as form fields (application/x-www-form-urlencoded)"
            )
        }
        let buffer = try await request.body.collect(upTo: configuration.maxBodySize)
        let bytes = buffer.readableBytesView
        let looksLikeJSON = bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "{")
        do {
            if form, !looksLikeJSON {
                return try URLEncodedFormDecoder().decode(T.self, from: String(decoding: bytes, as: UTF8.self))
            }
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw Problem.badRequest("malformed body: \(CatalogImport.describe(error))", code: "malformed-body")
        } catch let error as EngineError {
            throw Problem(error)
        } catch {
            throw Problem.badRequest("malformed form fields", code: "malformed-body")
        }
    }

    /// An integer query parameter within `range`, or a 400 naming it.
    func integer(_ name: String, in request: Request, default value: Int64?, range: ClosedRange<Int64>) throws -> Int64?
    {
        guard let text = request.uri.queryParameters[Substring(name)] else { return value }
        guard let number = Int64(text), range.contains(number) else {
            throw Problem.badRequest(
                "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)",
                code: "invalid-query"
            )
        }
        return number
    }
}

/// Tells browsers to use HTTPS only for this host for a year (the TLS listener's answers).
struct StrictTransportSecurityMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.strictTransportSecurity] = "max-age=31536000"
        return response
    }
}
