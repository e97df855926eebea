import Engine
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import TestSupport
import Testing

@testable import Gateway

/// Tenants' webhooks through the real broker: endpoints registered over the admin API, events queued in the
/// transactions of their changes, sent signed to a real HTTPS receiver on loopback that fails, hangs and recovers.
@Suite("Webhooks", .timeLimit(.minutes(3)))
struct WebhookTests {
    /// An HTTPS receiver whose answers the test chooses: fail with a status, hang, or take the event. It speaks
    /// HTTP/1.1, as the dispatcher does, and records each request's version.
    final class Receiver: Sendable {
        enum Mode: Sendable {
            case answer(Int)
            case hang
        }

        struct Received: Sendable {
            var body: String
            var signature: String
            var type: String
            var status: Int
            var version: HTTPVersion
        }

        final class State: Sendable {
            let lock = Mutex<(mode: Mode, received: [Received])>((.answer(200), []))

            /// Records one whole request and says how to answer it (nil: never).
            func take(_ head: HTTPRequestHead, body: ByteBuffer) -> Int? {
                lock.withLock {
                    let status: Int
                    switch $0.mode {
                    case .hang: status = 0
                    case .answer(let answer): status = answer
                    }
                    $0.received.append(
                        Received(
                            body: String(buffer: body),
                            signature: head.headers.first(name: "impulse-signature") ?? "",
                            type: head.headers.first(name: "impulse-event-type") ?? "",
                            status: status,
                            version: head.version
                        )
                    )
                    return status > 0 ? status : nil
                }
            }
        }

        /// Gathers one request at a time and answers it as `State` says.
        final class Handler: ChannelInboundHandler, @unchecked Sendable {
            typealias InboundIn = HTTPServerRequestPart
            typealias OutboundOut = HTTPServerResponsePart
            let state: State
            var head: HTTPRequestHead?
            var body = ByteBuffer()

            init(state: State) { self.state = state }

            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                switch unwrapInboundIn(data) {
                case .head(let head):
                    self.head = head
                    body.clear()
                case .body(var part):
                    body.writeBuffer(&part)
                case .end:
                    guard let head, let status = state.take(head, body: body) else { return }
                    var headers = HTTPHeaders([("content-length", "0")])
                    if !head.isKeepAlive { headers.add(name: "connection", value: "close") }
                    let response = HTTPResponseHead(
                        version: head.version,
                        status: HTTPResponseStatus(statusCode: status),
                        headers: headers
                    )
                    context.write(wrapOutboundOut(.head(response)), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                }
            }
        }

        let server: any Channel
        let certificateFile: String
        private let state = State()

        init(hostnames: [String] = ["localhost"]) async throws {
            let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: hostnames)
            certificateFile = TestBroker.temporaryDirectory() + "/receiver.crt"
            try certificatePEM.write(toFile: certificateFile, atomically: true, encoding: .utf8)
            var configuration = TLSConfiguration.makeServerConfiguration(
                certificateChain: [
                    .certificate(try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem))
                ],
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem))
            )
            // Offers h2 first, as most HTTPS servers do: a client that asked for it would get it, and this
            // receiver's HTTP/1.1 parser would take nothing.
            configuration.applicationProtocols = ["h2", "http/1.1"]
            let tls = try NIOSSLContext(configuration: configuration)
            let state = self.state
            server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(Handler(state: state))
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
        }

        var url: String { "https://localhost:\(server.localAddress?.port ?? 0)/hooks/impulse" }
        func set(_ mode: Mode) { state.lock.withLock { $0.mode = mode } }
        func close() async { try? await server.close() }
        var received: [Received] { state.lock.withLock { $0.received } }
        /// The events the receiver took (answered 2xx), in order.
        var taken: [Received] { received.filter { (200..<300).contains($0.status) } }
    }

    static func configuration(_ receiver: Receiver, window: Duration = .seconds(600)) -> WebhookConfiguration {
        WebhookConfiguration(
            policy: WebhookTargetPolicy(allowPrivateAddresses: true),
            trustRootsFile: receiver.certificateFile,
            timeout: .seconds(1),
            retry: WebhookRetryPolicy(initial: .milliseconds(200), maximum: .milliseconds(400), window: window),
            pollInterval: .milliseconds(100)
        )
    }

    func register(_ broker: TestBroker, _ body: String) async throws -> TestBroker.Reply {
        try await broker.send(
            .POST,
            "/t/acme/admin/v1/webhooks",
            user: "root",
            headers: [("Content-Type", "application/json")],
            body: body
        )
    }

    func attempts(_ broker: TestBroker, _ id: String) async throws -> [[String: Any]] {
        try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)/attempts", user: "root").json["items"]
            as? [[String: Any]] ?? []
    }

    @Test(
        "Events reach a failing, hanging, then recovering receiver signed, once taken, in order per user",
        arguments: TestDatabase.allCases
    )
    func failsHangsRecovers(_ database: TestDatabase) async throws {
        let receiver = try await Receiver()
        defer { Task { await receiver.close() } }
        receiver.set(.answer(500))
        try await TestBroker.run(database: database, webhooks: Self.configuration(receiver)) { broker in
            let events =
                #"["user.created", "user.deleted", "delivery.pushed", "delivery.failed", "delivery.read", "device.removed"]"#
            let created = try await register(broker, #"{"url": "\#(receiver.url)", "events": \#(events)}"#)
            #expect(created.status == 201, "\(created.text)")
            let id = try #require(created.json["id"] as? String)
            let secret = try #require(created.json["secret"] as? String)
            #expect(secret.hasPrefix("whsec_"))
            // The secret is shown once.
            let shown = try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root")
            #expect(shown.status == 200 && shown.json["secret"] == nil && !shown.text.contains(secret))

            // A user made and erased: two events of one user, queued with the changes.
            let user = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"username": "hook-user", "password": "h00k-pass"}"#
            )
            #expect(user.status == 201, "\(user.text)")
            #expect(try await broker.send(.DELETE, "/t/acme/admin/v1/users/hook-user", user: "root").status == 200)

            // Failing: the first event is tried again and again, the second waits behind it.
            #expect(try await eventually(seconds: 30) { receiver.received.count >= 3 })
            #expect(receiver.received.allSatisfy { $0.type == "user.created" }, "\(receiver.received.map(\.type))")
            // Hanging: the attempt times out (1 s) and is tried again.
            receiver.set(.hang)
            let hung = receiver.received.count
            #expect(try await eventually(seconds: 10) { receiver.received.count >= hung + 2 })
            receiver.set(.answer(204))
            #expect(try await eventually(seconds: 15) { receiver.taken.count == 2 })
            let taken = receiver.taken
            #expect(receiver.received.allSatisfy { $0.version == .http1_1 })
            #expect(taken.map(\.type) == ["user.created", "user.deleted"])
            // What a receiver checks: the signature over timestamp and body, with the endpoint's secret.
            for event in taken {
                #expect(WebhookSignature.verify(header: event.signature, body: event.body, secret: secret, now: Date()))
                #expect(
                    !WebhookSignature.verify(
                        header: event.signature,
                        body: event.body + " ",
                        secret: secret,
                        now: Date()
                    )
                )
                let object = try #require(
                    try JSONSerialization.jsonObject(with: Data(event.body.utf8)) as? [String: Any]
                )
                #expect(object["tenant"] as? String == "acme")
                #expect((object["data"] as? [String: Any])?["user"] as? String == "hook-user")
                #expect((object["id"] as? String)?.hasPrefix("evt_") == true)
            }
            #expect(!receiver.received.contains { $0.type == "user.deleted" && $0.status != 204 })
            // The receiver has the second event a moment before the broker records its answer.
            var after = try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root")
            let settled = try await eventually {
                after = try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root")
                return after.json["delivered"] as? Int == 2 && after.json["pending"] as? Int == 0
            }
            #expect(settled, "\(after.text)")
            let log = try await attempts(broker, id)
            let outcomes = Set(log.map { "\($0["outcome"] ?? "") \($0["error"] ?? "")" })
            #expect(outcomes.contains("retry answered 500"), "\(outcomes)")
            #expect(outcomes.contains("retry timed out"), "\(outcomes)")
            #expect(log.first?["outcome"] as? String == "delivered")

            // A hanging receiver does not hold pushes: a delivery is pushed and counted while it hangs.
            receiver.set(.hang)
            let device = try await broker.send(
                .PUT,
                "/t/acme/v1/devices/\(String(repeating: "cd", count: 32))",
                headers: [("Content-Type", "application/json")],
                body: #"{"name": "phone", "environment": "production"}"#
            )
            #expect((200..<300).contains(device.status))
            let delivered = try await broker.send(
                .POST,
                "/t/acme/admin/v1/users/alice/deliveries",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"impulse": "acme-3"}"#
            )
            #expect(delivered.status == 201)
            let pushed = try await eventually(seconds: 10) {
                let report = try await broker.send(.GET, "/t/acme/admin/v1/reports/engagement", user: "root")
                return (report.json["total"] as? [String: Any])?["pushed"] as? Int == 1
            }
            #expect(pushed)
            // Rotated: the new secret signs, and the old one still does for a day.
            let rotated = try await broker.send(.POST, "/t/acme/admin/v1/webhooks/\(id)/secret", user: "root")
            let newSecret = try #require(rotated.json["secret"] as? String)
            #expect(newSecret != secret && rotated.json["previousSecretExpiresAt"] is String)
            receiver.set(.answer(200))
            #expect(try await eventually(seconds: 15) { receiver.taken.contains { $0.type == "delivery.pushed" } })
            let push = try #require(receiver.taken.first { $0.type == "delivery.pushed" })
            #expect(push.body.contains(#""impulseID":"acme-3""#) && push.body.contains(#""user":"alice""#))
            #expect(push.body.contains(#""apnsID":"#) && push.body.contains(#""channels":"apns""#), "\(push.body)")
            #expect(try await broker.send(.PUT, "/v1/impulses/acme-3/read").status < 300)
            #expect(try await eventually(seconds: 15) { receiver.taken.contains { $0.type == "delivery.read" } })
            let read = try #require(receiver.taken.first { $0.type == "delivery.read" })
            #expect(WebhookSignature.verify(header: read.signature, body: read.body, secret: newSecret, now: Date()))
            #expect(WebhookSignature.verify(header: read.signature, body: read.body, secret: secret, now: Date()))
            // The app unregisters its device.
            #expect(
                try await broker.send(.DELETE, "/t/acme/v1/devices/\(String(repeating: "cd", count: 32))").status < 300
            )
            #expect(try await eventually(seconds: 15) { receiver.taken.contains { $0.type == "device.removed" } })
            #expect(
                receiver.taken.first { $0.type == "device.removed" }?.body.contains(#""reason":"unregistered""#) == true
            )

            #expect(try await broker.send(.DELETE, "/t/acme/admin/v1/webhooks/\(id)", user: "root").status == 204)
            #expect(try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root").status == 404)
        }
    }

    @Test("An event failing for its whole window is dropped and counted; bad endpoints are refused")
    func droppedAndRefused() async throws {
        let receiver = try await Receiver()
        defer { Task { await receiver.close() } }
        receiver.set(.answer(503))
        try await TestBroker.run(webhooks: Self.configuration(receiver, window: .seconds(1))) { broker in
            let created = try await register(broker, #"{"url": "\#(receiver.url)", "events": ["user.created"]}"#)
            let id = try #require(created.json["id"] as? String)
            #expect(
                try await broker.send(
                    .POST,
                    "/t/acme/admin/v1/users",
                    user: "root",
                    headers: [("Content-Type", "application/json")],
                    body: #"{"username": "doomed", "password": "d00med-pass"}"#
                ).status == 201
            )
            var shown: [String: Any] = [:]
            let dropped = try await eventually(seconds: 10) {
                shown = try await broker.send(.GET, "/t/acme/admin/v1/webhooks/\(id)", user: "root").json
                return shown["dropped"] as? Int == 1
            }
            #expect(dropped, "\(shown)")
            #expect(shown["pending"] as? Int == 0 && shown["delivered"] as? Int == 0)
            #expect(try await attempts(broker, id).first?["outcome"] as? String == "dropped")

            for body in [
                #"{"url": "http://example.com/hook", "events": ["user.created"]}"#,
                #"{"url": "https://example.com/hook", "events": ["user.renamed"]}"#,
                #"{"url": "https://example.com/hook", "events": []}"#,
                #"{"events": ["user.created"]}"#,
            ] {
                let refused = try await register(broker, body)
                #expect(refused.status == 422 || refused.status == 400, "\(body): \(refused.status)")
                #expect(refused.headers["content-type"].first == "application/problem+json")
            }
            // An app user is not an admin; another tenant's admin sees nothing.
            #expect(try await broker.send(.GET, "/t/acme/admin/v1/webhooks").status == 403)
        }
        // A broker that does not allow private addresses refuses them.
        try await TestBroker.run { broker in
            for url in ["https://localhost/hook", "https://127.0.0.1:8443/x", "https://10.1.2.3/x", "https://[::1]/x"] {
                let refused = try await register(broker, #"{"url": "\#(url)", "events": ["user.created"]}"#)
                #expect(refused.status == 422, "\(url): \(refused.status)")
            }
        }
    }
}
