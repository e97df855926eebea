import HTTPTypes
import Synchronization

/// Every operation the routers serve, as `METHOD /path` in the OpenAPI document's form (`{param}` for a path
/// parameter): a test holds it and the document together, so neither can gain a route the other lacks. `HEAD`
/// (answered for every `GET`) and `OPTIONS` are not operations of their own.
public final class RouteCatalog: Sendable {
    private let operations = Mutex<Set<String>>([])

    public init() {}

    /// Records a route of the router (Hummingbird's form: `:param`, `**` for the rest of the path).
    func record(_ method: HTTPRequest.Method, _ path: String) {
        guard method != .head, method != .options else { return }
        let template = path.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            if segment.hasPrefix(":") { return "{" + segment.dropFirst() + "}" }
            if segment == "**" { return "{path}" }
            return String(segment)
        }.joined(separator: "/")
        _ = operations.withLock { $0.insert("\(method.rawValue) \(template)") }
    }

    public var all: Set<String> { operations.withLock { $0 } }
}
