import AsyncHTTPClient
import Engine
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// Where a webhook attempt connects. The endpoint's host is resolved for every attempt, every address it resolves
/// to is checked (``NetworkAddress/isPublic``, unless private addresses are allowed), and the connection goes to
/// one of those checked addresses, with the name kept for TLS (SNI and the certificate check): a name that
/// resolves to a public address at the check and to an internal one at the connect (DNS rebinding) still reaches
/// the address that was checked.
///
/// One HTTP client per (host, address) keeps connections alive between attempts; at most `maximumClients` idle
/// ones are kept, the least recently used are shut down.
final class WebhookConnector: Sendable {
    typealias Resolver = @Sendable (String) async throws -> [NetworkAddress]

    /// Why an attempt did not connect, as the tenant sees it: never the address, the port or what answered there.
    struct Refused: Error, CustomStringConvertible {
        let description: String
        static let notAllowed = Refused(
            description: "the endpoint's host resolves to an address webhooks may not reach (this machine or a "
                + "private network)"
        )
        static let unresolved = Refused(description: "the endpoint's host name does not resolve")
    }

    private struct Entry {
        let client: HTTPClient
        var inFlight: Int
        var lastUsed: ContinuousClock.Instant
    }

    let resolve: Resolver
    let allowPrivateAddresses: Bool
    let configuration: HTTPClient.Configuration
    let resolveTimeout: Duration
    let maximumClients: Int
    private let clients = Mutex<[String: Entry]>([:])

    init(
        configuration: HTTPClient.Configuration,
        allowPrivateAddresses: Bool,
        resolveTimeout: Duration,
        maximumClients: Int = 64,
        resolve: @escaping Resolver = WebhookConnector.systemResolve
    ) {
        self.configuration = configuration
        self.allowPrivateAddresses = allowPrivateAddresses
        self.resolveTimeout = resolveTimeout
        self.maximumClients = maximumClients
        self.resolve = resolve
    }

    /// Runs `request` with a client pinned to a checked address of the URL's host.
    func execute<T: Sendable>(
        url: String,
        _ request: @Sendable (HTTPClient) async throws -> T
    ) async throws -> T {
        guard let host = URL(string: url)?.host?.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        else { throw Refused.unresolved }
        let addresses = try await resolveWithin(host)
        guard !addresses.isEmpty else { throw Refused.unresolved }
        if !allowPrivateAddresses, addresses.contains(where: { !$0.isPublic }) { throw Refused.notAllowed }
        // IPv4 first: receivers are reached over it far more often, and one address is pinned.
        let address = addresses.first(where: \.isIPv4) ?? addresses[0]
        let client = acquire(host: host, address: address)
        defer { release(host: host, address: address) }
        return try await request(client)
    }

    func shutdown() async {
        let all = clients.withLock { entries in
            defer { entries = [:] }
            return entries.values.map(\.client)
        }
        for client in all { try? await client.shutdown() }
    }

    private func resolveWithin(_ host: String) async throws -> [NetworkAddress] {
        if let literal = NetworkAddress(literal: host) { return [literal] }
        let resolve = resolve
        let timeout = resolveTimeout
        return try await withThrowingTaskGroup(of: [NetworkAddress]?.self) { group in
            group.addTask { try await resolve(host) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let addresses = try await group.next() ?? nil else { throw Refused.unresolved }
            return addresses
        }
    }

    private func key(_ host: String, _ address: NetworkAddress) -> String { host + "|" + address.description }

    private func acquire(host: String, address: NetworkAddress) -> HTTPClient {
        let key = key(host, address)
        let (client, evicted) = clients.withLock { entries -> (HTTPClient, [HTTPClient]) in
            if var entry = entries[key] {
                entry.inFlight += 1
                entry.lastUsed = .now
                entries[key] = entry
                return (entry.client, [])
            }
            var configuration = configuration
            configuration.dnsOverride = [host: address.description]
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            entries[key] = Entry(client: client, inFlight: 1, lastUsed: .now)
            var evicted: [HTTPClient] = []
            let idle = entries.filter { $0.value.inFlight == 0 }.sorted { $0.value.lastUsed < $1.value.lastUsed }
            for (old, entry) in idle.prefix(max(0, entries.count - maximumClients)) {
                entries[old] = nil
                evicted.append(entry.client)
            }
            return (client, evicted)
        }
        // An evicted client has nothing in flight; it closes its idle connections on its own.
        for old in evicted { old.shutdown { _ in } }
        return client
    }

    private func release(host: String, address: NetworkAddress) {
        let key = key(host, address)
        clients.withLock { entries in
            entries[key]?.inFlight -= 1
            entries[key]?.lastUsed = .now
        }
    }

    /// Name resolution runs here, each lookup on its own (a concurrent queue, as NIO's own resolver does): a name
    /// whose DNS server does not answer blocks its lookup for seconds, and on a few shared threads it held every other
    /// endpoint's lookup behind it (CI: a test's `localhost` waited behind another test's unreachable name). Lookups
    /// in flight are bounded by the dispatcher's attempts in flight.
    static let resolverQueue = DispatchQueue(label: "impulse-broker.webhook-resolver", attributes: .concurrent)

    /// The system's resolver (`getaddrinfo`, on ``resolverQueue``): every address the name has, IPv4 and IPv6.
    @Sendable static func systemResolve(_ host: String) async throws -> [NetworkAddress] {
        try await withCheckedThrowingContinuation { continuation in
            resolverQueue.async { continuation.resume(with: Result { try lookup(host) }) }
        }
    }

    private static func lookup(_ host: String) throws -> [NetworkAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { throw Refused.unresolved }
        defer { freeaddrinfo(list) }
        var addresses: [NetworkAddress] = []
        var next = list
        while let info = next {
            defer { next = info.pointee.ai_next }
            guard let socketAddress = info.pointee.ai_addr else { continue }
            switch Int32(socketAddress.pointee.sa_family) {
            case AF_INET:
                let bytes = socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) }
                }
                NetworkAddress(bytes: bytes).map { addresses.append($0) }
            case AF_INET6:
                let bytes = socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                }
                NetworkAddress(bytes: bytes).map { addresses.append($0) }
            default: continue
            }
        }
        return addresses
    }
}
