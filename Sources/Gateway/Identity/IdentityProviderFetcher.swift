import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

/// What a provider's discovery document (`/.well-known/openid-configuration`) says that the broker uses.
public struct IdentityProviderDocument: Sendable, Equatable {
    public var issuer: String
    public var jwksURI: String
    public var authorizationEndpoint: String?
    public var tokenEndpoint: String?
}

/// Why a provider's documents could not be had. The tenant's admins see `description`: never an address or a port.
public struct IdentityProviderError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// Fetches a provider's discovery document and key set: HTTPS only, only to the configured issuer's host, through the
/// webhooks' connector (every address the host resolves to checked, the connection pinned to a checked one), each
/// request within `timeout` from connect to the last byte, and each answer within a size limit.
public final class IdentityProviderFetcher: Sendable {
    public static let maximumDocumentBytes = 64 * 1024
    let connector: WebhookConnector
    let timeout: Duration

    /// `trustRootsFile`: extra roots (a test's or a company's private CA); `allowPrivateAddresses`: a provider on
    /// this machine or a private network (an operator's choice, as for webhooks).
    public init(
        timeout: Duration = .seconds(5),
        trustRootsFile: String? = nil,
        allowPrivateAddresses: Bool = false
    ) {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let trustRootsFile { tls.additionalTrustRoots = [.file(trustRootsFile)] }
        let amount = TimeAmount.nanoseconds(Int64(timeout / .nanoseconds(1)))
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: amount, read: amount)
        )
        configuration.httpVersion = .http1Only
        self.timeout = timeout
        connector = WebhookConnector(
            configuration: configuration,
            allowPrivateAddresses: allowPrivateAddresses,
            resolveTimeout: timeout,
            maximumClients: 16
        )
    }

    public func shutdown() async { await connector.shutdown() }

    /// The issuer's host, when the issuer is an https URL the broker may ask.
    static func host(ofHTTPS text: String) -> String? {
        guard let url = URL(string: text), url.scheme?.lowercased() == "https", let host = url.host, !host.isEmpty,
            url.user == nil, url.query == nil, url.fragment == nil
        else { return nil }
        return host.lowercased()
    }

    /// The discovery document of `issuer`, whose `issuer` must be `issuer` exactly and whose `jwks_uri` must be on
    /// its host.
    public func discover(issuer: String) async throws(IdentityProviderError) -> IdentityProviderDocument {
        guard let host = Self.host(ofHTTPS: issuer) else {
            throw IdentityProviderError("the issuer must be an https URL without credentials, query or fragment")
        }
        let base = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let (body, _) = try await get(base + "/.well-known/openid-configuration", limit: Self.maximumDocumentBytes)
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let claimed = object["issuer"] as? String, let jwksURI = object["jwks_uri"] as? String
        else { throw IdentityProviderError("the discovery document is not JSON with issuer and jwks_uri") }
        guard claimed == issuer else {
            throw IdentityProviderError("the discovery document names another issuer")
        }
        guard Self.host(ofHTTPS: jwksURI) == host else {
            throw IdentityProviderError("the provider's jwks_uri is not an https URL on the issuer's host")
        }
        return IdentityProviderDocument(
            issuer: claimed,
            jwksURI: jwksURI,
            authorizationEndpoint: object["authorization_endpoint"] as? String,
            tokenEndpoint: object["token_endpoint"] as? String
        )
    }

    /// The key set at `document.jwksURI` and how long the provider says to keep it.
    public func keys(
        _ document: IdentityProviderDocument
    ) async throws(IdentityProviderError) -> (
        JSONWebKeySet, maxAge: TimeInterval?
    ) {
        let (body, cacheControl) = try await get(document.jwksURI, limit: JSONWebKeySet.maximumBytes)
        do {
            return (try JSONWebKeySet(json: body), IdentityKeyCache.maxAge(cacheControl: cacheControl))
        } catch {
            throw IdentityProviderError("the provider's key set: \(error.message)")
        }
    }

    /// One GET: 200 with at most `limit` bytes, within the timeout from connect to the last byte (a provider that
    /// drips its answer is cut off at the deadline, not after a read timeout per byte).
    func get(_ url: String, limit: Int) async throws(IdentityProviderError) -> (Data, cacheControl: String?) {
        let timeout = timeout
        let connector = connector
        do {
            return try await withThrowingTaskGroup(of: (Data, cacheControl: String?).self) { group in
                group.addTask { try await Self.fetch(url, limit: limit, timeout: timeout, connector: connector) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw HTTPClientError.deadlineExceeded
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        } catch let error as IdentityProviderError {
            throw error
        } catch let refused as WebhookConnector.Refused {
            throw IdentityProviderError(refused.description.replacingOccurrences(of: "webhooks", with: "the broker"))
        } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout {
            throw IdentityProviderError("the provider did not answer within \(timeout)")
        } catch {
            throw IdentityProviderError("could not reach the provider over TLS")
        }
    }

    private static func fetch(
        _ url: String,
        limit: Int,
        timeout: Duration,
        connector: WebhookConnector
    ) async throws
        -> (Data, cacheControl: String?)
    {
        try await connector.execute(url: url) { client in
            var request = HTTPClientRequest(url: url)
            request.headers.add(name: "Accept", value: "application/json")
            request.headers.add(name: "User-Agent", value: "impulse-broker-identity")
            let deadline = NIODeadline.now() + .nanoseconds(Int64(timeout / .nanoseconds(1)))
            let response = try await client.execute(request, deadline: deadline)
            guard response.status == .ok else {
                throw IdentityProviderError("the provider answered \(response.status.code) for \(Self.path(url))")
            }
            var body = Data()
            for try await part in response.body {
                body.append(contentsOf: part.readableBytesView)
                if body.count > limit {
                    throw IdentityProviderError("the provider's \(Self.path(url)) is larger than \(limit) bytes")
                }
            }
            return (body, response.headers.first(name: "cache-control"))
        }
    }

    /// A URL's path, for messages (never its query).
    static func path(_ url: String) -> String { URL(string: url)?.path ?? "document" }
}
