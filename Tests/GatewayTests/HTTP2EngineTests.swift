import Engine
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import Testing

@testable import Gateway

/// A TLS server and client pair on loopback, both on the libnghttp2 engine.
struct EnginePair {
    let server: HTTP2Server
    let client: HTTP2ClientConnection
    let connections: NIOLockedValueBox<[HTTP2ServerConnection]>

    static func tls() throws -> (server: TLSConfiguration, client: TLSConfiguration) {
        let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: ["localhost"])
        let certificate = try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        let server = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        var client = TLSConfiguration.makeClientConfiguration()
        client.trustRoots = .certificates([certificate])
        return (server, client)
    }

    static func start(
        maxConcurrentStreams: UInt32 = 1000,
        onEvent: @escaping @Sendable (HTTP2Event) -> Void = { _ in },
        onRequest: @escaping @Sendable (HTTP2ServerRequest, HTTP2ServerConnection) -> Void
    ) async throws -> EnginePair {
        let (serverTLS, clientTLS) = try tls()
        let connections = NIOLockedValueBox<[HTTP2ServerConnection]>([])
        let server = try await HTTP2Server.bind(
            host: "127.0.0.1",
            port: 0,
            tls: serverTLS,
            maxConcurrentStreams: maxConcurrentStreams,
            onConnection: { connection in connections.withLockedValue { $0.append(connection) } },
            onRequest: onRequest
        )
        let client = try await HTTP2ClientConnection.connect(
            host: "127.0.0.1",
            port: server.port,
            tls: clientTLS,
            serverHostname: "localhost",
            onEvent: onEvent
        )
        return EnginePair(server: server, client: client, connections: connections)
    }

    func stop() async {
        await client.close()
        await server.close()
    }

    static func post(_ path: String, body: String? = nil) -> ([HTTP2Header], ByteBuffer?) {
        (
            [
                HTTP2Header(":method", "POST"), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                HTTP2Header(":authority", "localhost"),
            ], body.map { ByteBuffer(string: $0) }
        )
    }
}

@Suite("HTTP/2 engine on libnghttp2", .timeLimit(.minutes(3)))
struct HTTP2EngineTests {
    @Test("A request and its answer cross TLS whole; an answer without body is a single HEADERS frame")
    func roundTrip() async throws {
        let pair = try await EnginePair.start { request, _ in
            if request.message[":path"] == "/empty" {
                request.respond(status: 200, headers: [HTTP2Header("apns-id", "abc")])
            } else {
                var body = request.message.body
                request.respond(
                    status: 201,
                    headers: [HTTP2Header("x-echo", request.message["x-in"] ?? "")],
                    body: body.readSlice(length: body.readableBytes)
                )
            }
        }
        var (headers, body) = EnginePair.post("/echo", body: String(repeating: "ä", count: 40_000))
        headers.append(HTTP2Header("X-In", "value"))
        let echoed = try await pair.client.send(headers, body: body, deadline: .seconds(5))
        #expect(echoed.status == 201)
        #expect(echoed["x-echo"] == "value")
        #expect(
            echoed.body.getString(at: 0, length: echoed.body.readableBytes) == String(repeating: "ä", count: 40_000)
        )
        let (emptyHeaders, _) = EnginePair.post("/empty")
        let empty = try await pair.client.send(emptyHeaders, deadline: .seconds(5))
        #expect(empty.status == 200 && empty["apns-id"] == "abc" && empty.body.readableBytes == 0)
        await pair.stop()
    }

    @Test("An APNs request's apns-id and collapse id stay out of the HPACK table; repeating fields enter it")
    func headerIndexing() async throws {
        let pair = try await EnginePair.start { request, _ in request.respond(status: 200, headers: []) }
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let payload = try ImpulsePayload(title: "Hello", badge: 1, impulseID: "x").encoded()
        func send(_ headers: [HTTP2Header]) async throws -> Int {
            let answer = try await pair.client.send(headers, body: ByteBuffer(bytes: payload), deadline: .seconds(5))
            #expect(answer.status == 200)
            return try await pair.client.headerEncoderTableSize()
        }
        func push(_ n: Int) throws -> [HTTP2Header] {
            try APNsNotification(token: token, topic: "com.example", collapseID: "delivery-\(n)", payload: payload)
                .headerBlock(authority: "localhost", authorization: nil).headers
        }
        let first = try await send(try push(0))
        #expect(first > 0)  // the repeating fields went in
        // Each push's new apns-id and collapse id do not grow the table...
        for n in 1...3 { #expect(try await send(try push(n)) == first) }
        // ...while an indexed header with a new value does (the measurement sees indexing).
        #expect(try await send(try push(4) + [HTTP2Header("x-other", "new")]) > first)
        await pair.stop()
    }

    @Test("Hundreds of concurrent requests share one connection within the server's stream limit")
    func concurrency() async throws {
        let open = NIOLockedValueBox((current: 0, peak: 0))
        let pair = try await EnginePair.start(maxConcurrentStreams: 20) { request, _ in
            open.withLockedValue {
                $0.current += 1
                $0.peak = max($0.peak, $0.current)
            }
            request.eventLoop.scheduleTask(in: .milliseconds(2)) {
                open.withLockedValue { $0.current -= 1 }
                request.respond(status: 200)
            }
        }
        let statuses = try await withThrowingTaskGroup(of: Int?.self) { group in
            for index in 0..<400 {
                group.addTask {
                    let (headers, body) = EnginePair.post("/\(index)", body: "{}")
                    return try await pair.client.send(headers, body: body, deadline: .seconds(20)).status
                }
            }
            return try await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(statuses.count == 400 && statuses.allSatisfy { $0 == 200 })
        #expect(open.withLockedValue { $0.peak } <= 20)
        #expect(try await pair.client.streamState().maxConcurrentStreams == 20)
        await pair.stop()
    }

    @Test("A stream with no answer hits its deadline and is cancelled; the connection stays usable")
    func deadline() async throws {
        let pair = try await EnginePair.start { request, _ in
            if request.message[":path"] != "/hang" { request.respond(status: 200) }
        }
        let (hang, _) = EnginePair.post("/hang")
        let error = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(hang, deadline: .milliseconds(100))
        }
        #expect(error?.code == .deadlineExceeded)
        let (ok, _) = EnginePair.post("/ok")
        #expect(try await pair.client.send(ok, deadline: .seconds(5)).status == 200)
        #expect(try await pair.client.streamState().inFlight == 0)
        await pair.stop()
    }

    @Test("Resets: REFUSED_STREAM means not processed (resend), others are a reset")
    func resets() async throws {
        let pair = try await EnginePair.start { request, _ in
            request.reset(
                errorCode: request.message[":path"] == "/refuse"
                    ? HTTP2ErrorCode.refusedStream : HTTP2ErrorCode.internalError
            )
        }
        let refused = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(EnginePair.post("/refuse").0, deadline: .seconds(5))
        }
        #expect(refused?.code == .notProcessed)
        let reset = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(EnginePair.post("/boom").0, deadline: .seconds(5))
        }
        #expect(reset?.code == .streamReset && reset?.errorCode == HTTP2ErrorCode.internalError)
        await pair.stop()
    }

    @Test("GOAWAY: streams the server never processed fail as not processed, and the debug data arrives")
    func goAway() async throws {
        let seen = NIOLockedValueBox<[HTTP2Event]>([])
        let respond: @Sendable (HTTP2ServerRequest, HTTP2ServerConnection) -> Void = { request, connection in
            // The first request is answered; the second triggers GOAWAY naming the first as the last processed.
            if request.message[":path"] == "/first" {
                request.respond(status: 200)
            } else {
                connection.goAway(
                    errorCode: HTTP2ErrorCode.noError,
                    debugData: #"{"reason":"Shutdown"}"#,
                    lastStreamID: 1
                )
            }
        }
        let pair = try await EnginePair.start(
            onEvent: { event in seen.withLockedValue { $0.append(event) } },
            onRequest: respond
        )
        #expect(try await pair.client.send(EnginePair.post("/first").0, deadline: .seconds(5)).status == 200)
        let error = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(EnginePair.post("/second").0, deadline: .seconds(5))
        }
        #expect(error?.code == .notProcessed)
        let goAways = seen.withLockedValue { events in
            events.compactMap { if case .goAway(_, _, let debug) = $0 { debug } else { nil } }
        }
        #expect(goAways == [#"{"reason":"Shutdown"}"#])
        let after = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(EnginePair.post("/third").0, deadline: .seconds(5))
        }
        #expect(after?.code == .notProcessed)
        await pair.stop()
    }

    @Test("A server changing its stream limit at run time is seen by the client")
    func settingsChange() async throws {
        let pair = try await EnginePair.start(maxConcurrentStreams: 100) { request, connection in
            connection.announce(maxConcurrentStreams: 1)
            request.respond(status: 200)
        }
        #expect(try await pair.client.send(EnginePair.post("/x").0, deadline: .seconds(5)).status == 200)
        #expect(try await pair.client.send(EnginePair.post("/y").0, deadline: .seconds(5)).status == 200)
        #expect(try await pair.client.streamState().maxConcurrentStreams == 1)
        await pair.stop()
    }

    @Test("A connection dropped mid-stream fails what is pending and nothing else")
    func dropped() async throws {
        let pair = try await EnginePair.start { _, connection in connection.drop() }
        let error = await #expect(throws: HTTP2EngineError.self) {
            try await pair.client.send(EnginePair.post("/x").0, deadline: .seconds(5))
        }
        #expect(error?.code == .connectionClosed)
        #expect(try await pair.client.streamState().usable == false)
        await pair.stop()
    }
}
