import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport
import Testing

@testable import Gateway

/// A tenant's provider's keys fetched over real HTTPS on loopback (issue 46, item 1): discovery, then the key set,
/// cached, fetched again at once for a rotated key, and kept while the provider hangs, fails or drops the connection.
@Suite("Identity provider keys", .timeLimit(.minutes(2)))
struct IdentityProviderKeysTests {
    /// An OpenID provider's two documents over HTTPS (HTTP/1.1, which is all the fetcher speaks): the discovery
    /// document at the issuer's well-known path and the key set at `/keys`, answered as the test says.
    final class Provider: Sendable {
        enum Mode: Sendable {
            case serve
            case status(Int)
            case hang
            /// Closes the connection when the request arrives.
            case drop
        }

        struct State {
            var mode = Mode.serve
            var keys: [[String: Any]] = []
            var cacheControl: String? = "max-age=600"
            var discoveryIssuer: String?
            var jwksURI: String?
            var padding = 0
            var requests: [String] = []
        }

        final class Shared: @unchecked Sendable {
            let lock = Mutex<State>(State())
        }

        final class Handler: ChannelInboundHandler, @unchecked Sendable {
            typealias InboundIn = HTTPServerRequestPart
            typealias OutboundOut = HTTPServerResponsePart
            let shared: Shared
            let issuer: @Sendable () -> String
            init(shared: Shared, issuer: @escaping @Sendable () -> String) {
                self.shared = shared
                self.issuer = issuer
            }

            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                guard case .head(let head) = unwrapInboundIn(data) else { return }
                let issuer = issuer()
                let (mode, body, cacheControl): (Mode, Data, String?) = shared.lock.withLock { state in
                    state.requests.append(head.uri)
                    let object: [String: Any]
                    if head.uri.hasSuffix("/.well-known/openid-configuration") {
                        object = [
                            "issuer": state.discoveryIssuer ?? issuer, "jwks_uri": state.jwksURI ?? issuer + "/keys",
                            "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token",
                        ]
                    } else {
                        object = ["keys": state.keys, "padding": String(repeating: "x", count: state.padding)]
                    }
                    return (state.mode, try! JSONSerialization.data(withJSONObject: object), state.cacheControl)
                }
                switch mode {
                case .hang: return
                case .drop:
                    context.close(promise: nil)
                    return
                case .status(let code):
                    let response = HTTPResponseHead(
                        version: head.version,
                        status: HTTPResponseStatus(statusCode: code),
                        headers: ["content-length": "0"]
                    )
                    context.write(wrapOutboundOut(.head(response)), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                case .serve:
                    var headers = HTTPHeaders([
                        ("content-type", "application/json"), ("content-length", "\(body.count)"),
                    ])
                    if let cacheControl { headers.add(name: "cache-control", value: cacheControl) }
                    context.write(
                        wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))),
                        promise: nil
                    )
                    context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        }

        let server: any Channel
        let certificateFile: String
        let shared = Shared()

        init() async throws {
            let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: ["localhost"])
            certificateFile = TestBroker.temporaryDirectory() + "/provider.crt"
            try certificatePEM.write(toFile: certificateFile, atomically: true, encoding: .utf8)
            let tls = try NIOSSLContext(
                configuration: TLSConfiguration.makeServerConfiguration(
                    certificateChain: [
                        .certificate(try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem))
                    ],
                    privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem))
                )
            )
            let shared = shared
            let port = Mutex<Int>(0)
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(
                            Handler(shared: shared) { "https://localhost:\(port.withLock { $0 })/tenant-a" }
                        )
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
            let bound = server.localAddress?.port ?? 0
            port.withLock { $0 = bound }
        }

        var issuer: String { "https://localhost:\(server.localAddress?.port ?? 0)/tenant-a" }
        func update(_ change: (inout State) -> Void) { shared.lock.withLock { change(&$0) } }
        var requests: [String] { shared.lock.withLock { $0.requests } }
        func close() async { try? await server.close() }
    }

    static let signer = P256.Signing.PrivateKey()
    static let rotated = P256.Signing.PrivateKey()
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func jwk(_ key: P256.Signing.PrivateKey, id: String) -> [String: Any] {
        let point = key.publicKey.x963Representation
        return [
            "kty": "EC", "crv": "P-256", "kid": id, "use": "sig",
            "x": ProviderJWT.base64URL(point[1..<33]), "y": ProviderJWT.base64URL(point[33..<65]),
        ]
    }

    func token(_ key: P256.Signing.PrivateKey, id: String, issuer: String) throws -> String {
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "kid": id])
        let claims = try JSONSerialization.data(withJSONObject: [
            "iss": issuer, "aud": "app-client", "sub": "00u-ada", "exp": now.timeIntervalSince1970 + 86_400 * 2,
            // Each token its own: a token judged before is answered from the cache, without the provider.
            "jti": UUID().uuidString,
        ])
        let input = ProviderJWT.base64URL(header) + "." + ProviderJWT.base64URL(claims)
        return input + "." + ProviderJWT.base64URL(try key.signature(for: Data(input.utf8)).rawRepresentation)
    }

    func withProvider(
        timeout: Duration = .seconds(5),
        allowPrivate: Bool = true,
        _ body: (Provider, IdentityProviderKeys, IdentityTokenPolicy) async throws -> Void
    ) async throws {
        let provider = try await Provider()
        provider.update { $0.keys = [Self.jwk(Self.signer, id: "k1")] }
        let fetcher = IdentityProviderFetcher(
            timeout: timeout,
            trustRootsFile: provider.certificateFile,
            allowPrivateAddresses: allowPrivate
        )
        let policy = IdentityTokenPolicy(issuer: provider.issuer, audiences: ["app-client"])
        do {
            try await body(provider, IdentityProviderKeys(fetcher: fetcher), policy)
        } catch {
            await fetcher.shutdown()
            await provider.close()
            throw error
        }
        await fetcher.shutdown()
        await provider.close()
    }

    func refusal(
        _ keys: IdentityProviderKeys,
        _ token: String,
        _ policy: IdentityTokenPolicy,
        at time: Date
    ) async
        -> IdentityTokenError?
    {
        do {
            _ = try await keys.verify(token, tenant: "acme", policy: policy, now: time)
            return nil
        } catch {
            return error
        }
    }

    @Test("Discovery and keys are fetched once, used while fresh, fetched again when stale or a key id is new")
    func cachedAndRotated() async throws {
        try await withProvider { provider, keys, policy in
            let first = try token(Self.signer, id: "k1", issuer: policy.issuer)
            let verified = try await keys.verify(first, tenant: "acme", policy: policy, now: now)
            #expect(verified.subject == "00u-ada")
            #expect(provider.requests == ["/tenant-a/.well-known/openid-configuration", "/tenant-a/keys"])
            let second = try token(Self.signer, id: "k1", issuer: policy.issuer)
            _ = try await keys.verify(second, tenant: "acme", policy: policy, now: now.addingTimeInterval(599))
            #expect(provider.requests.count == 2)
            let third = try token(Self.signer, id: "k1", issuer: policy.issuer)
            _ = try await keys.verify(third, tenant: "acme", policy: policy, now: now.addingTimeInterval(600))
            #expect(provider.requests.count == 4)
            // The provider rotates: a token under the new key id fetches at once and is accepted.
            provider.update { $0.keys = [Self.jwk(Self.signer, id: "k1"), Self.jwk(Self.rotated, id: "k2")] }
            let later = now.addingTimeInterval(610)
            let rotated = try token(Self.rotated, id: "k2", issuer: policy.issuer)
            _ = try await keys.verify(rotated, tenant: "acme", policy: policy, now: later)
            #expect(provider.requests.count == 6)
            // Made-up key ids: refused without asking the provider again within the minute, then asked once.
            let madeUp = try token(Self.rotated, id: "k-\(UUID())", issuer: policy.issuer)
            #expect(await refusal(keys, madeUp, policy, at: later.addingTimeInterval(30))?.code == .unknownKey)
            #expect(await refusal(keys, madeUp, policy, at: later.addingTimeInterval(59))?.code == .unknownKey)
            #expect(provider.requests.count == 6)
            #expect(await refusal(keys, madeUp, policy, at: later.addingTimeInterval(60))?.code == .unknownKey)
            #expect(provider.requests.count == 8)
            // Another tenant naming the same provider has its own cache.
            _ = try await keys.verify(first, tenant: "globex", policy: policy, now: later)
            #expect(provider.requests.count == 10)
        }
    }

    @Test("A token judged before costs no signature check until it expires; a forged one is refused from the cache")
    func judgedOnce() async throws {
        try await withProvider { _, keys, policy in
            let signed = try token(Self.signer, id: "k1", issuer: policy.issuer)
            for second in 0..<5 {
                _ = try await keys.verify(
                    signed,
                    tenant: "acme",
                    policy: policy,
                    now: now.addingTimeInterval(Double(second))
                )
            }
            #expect(keys.signatureChecks.load(ordering: .relaxed) == 1)
            // Another tenant, or the same tenant with other clients, judges it again.
            _ = try await keys.verify(signed, tenant: "globex", policy: policy, now: now)
            var wider = policy
            wider.audiences.insert("console-client")
            _ = try await keys.verify(signed, tenant: "acme", policy: wider, now: now)
            #expect(keys.signatureChecks.load(ordering: .relaxed) == 3)
            // Past its exp the cached judgement is gone: the token is checked again and refused.
            let expired = await refusal(keys, signed, policy, at: now.addingTimeInterval(86_400 * 2 + 61))
            #expect(expired?.code == .expired)
            #expect(keys.signatureChecks.load(ordering: .relaxed) == 4)
            // A forged signature: checked once, then refused from the cache.
            let forged = try token(Self.rotated, id: "k1", issuer: policy.issuer)
            for _ in 0..<5 { #expect(await refusal(keys, forged, policy, at: now)?.code == .badSignature) }
            #expect(keys.signatureChecks.load(ordering: .relaxed) == 5)
        }
        let cache = IdentityTokenCache(capacity: 3)
        let bad = IdentityTokenError(.badSignature, "x")
        for index in 0..<10 { cache.remember(Data([UInt8(index)]), .failure(bad), now: now) }
        #expect(cache.count <= 3)
        // Refusals that time or the provider can change are not remembered.
        cache.remember(Data([99]), .failure(IdentityTokenError(.providerUnavailable, "x")), now: now)
        #expect(try cache.lookup(Data([99]), now: now) == nil)
    }

    @Test("A provider that hangs, fails or drops: cached keys keep serving; with none cached, 503's refusal")
    func unreachable() async throws {
        for mode in [Provider.Mode.hang, .status(500), .drop] {
            try await withProvider(timeout: .seconds(1)) { provider, keys, policy in
                let signed = try token(Self.signer, id: "k1", issuer: policy.issuer)
                _ = try await keys.verify(signed, tenant: "acme", policy: policy, now: now)
                provider.update { $0.mode = mode }
                // A day later the keys are stale: the fetch fails and the cached keys verify anyway.
                let stale = now.addingTimeInterval(86_400)
                let started = ContinuousClock.now
                let later = try token(Self.signer, id: "k1", issuer: policy.issuer)
                _ = try await keys.verify(later, tenant: "acme", policy: policy, now: stale)
                // The fetch ends at its 1 s deadline rather than waiting on the provider (a hang without it lasts
                // until the suite's time limit); the bound is loose so that a slow machine does not fail it.
                #expect(started.duration(to: .now) < .seconds(20), "\(mode)")
                // Within the backoff nothing is asked; a tenant with nothing cached is refused as unavailable.
                let count = provider.requests.count
                let another = try token(Self.signer, id: "k1", issuer: policy.issuer)
                _ = try await keys.verify(another, tenant: "acme", policy: policy, now: stale.addingTimeInterval(4))
                #expect(provider.requests.count == count, "\(mode)")
                let fresh = IdentityProviderKeys(fetcher: keys.fetcher)
                let error = await refusal(fresh, signed, policy, at: stale)
                #expect(error?.code == .providerUnavailable, "\(mode)")
                #expect(error?.message.contains("127.0.0.1") == false, "\(error?.message ?? "")")
                // The provider recovers: after the backoff the keys are fetched again.
                provider.update { $0.mode = .serve }
                let recovered = try token(Self.signer, id: "k1", issuer: policy.issuer)
                _ = try await keys.verify(recovered, tenant: "acme", policy: policy, now: stale.addingTimeInterval(6))
                #expect(provider.requests.count > count, "\(mode)")
            }
        }
    }

    @Test("Another issuer in discovery, keys on another host, an oversized key set or a private address: refused")
    func refusedDocuments() async throws {
        try await withProvider { provider, keys, policy in
            let signed = try token(Self.signer, id: "k1", issuer: policy.issuer)
            provider.update { $0.discoveryIssuer = "https://login.other.example/tenant-a" }
            var error = await refusal(keys, signed, policy, at: now)
            #expect(error?.code == .providerUnavailable && error!.message.contains("another issuer"), "\(error!)")
            provider.update {
                $0.discoveryIssuer = nil
                $0.jwksURI = "https://keys.other.example/keys"
            }
            error = await refusal(keys, signed, policy, at: now.addingTimeInterval(10))
            #expect(error?.message.contains("issuer's host") == true, "\(error!)")
            #expect(!provider.requests.contains("/keys"))
            provider.update {
                $0.jwksURI = nil
                $0.padding = JSONWebKeySet.maximumBytes
            }
            error = await refusal(keys, signed, policy, at: now.addingTimeInterval(30))
            #expect(error?.message.contains("larger than") == true, "\(error!)")
        }
        try await withProvider(allowPrivate: false) { provider, keys, policy in
            let error = await refusal(keys, try token(Self.signer, id: "k1", issuer: policy.issuer), policy, at: now)
            #expect(error?.code == .providerUnavailable && error!.message.contains("private network"), "\(error!)")
            #expect(provider.requests.isEmpty)
        }
        // An issuer that is not https is never asked.
        let plain = IdentityProviderFetcher(allowPrivateAddresses: true)
        await #expect(throws: IdentityProviderError.self) { try await plain.discover(issuer: "http://localhost:1/x") }
        await plain.shutdown()
    }
}
