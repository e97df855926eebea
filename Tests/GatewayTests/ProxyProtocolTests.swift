import Engine
import Foundation
import NIOCore
import NIOPosix
import TestSupport
import Testing

@testable import Gateway

/// HAProxy (Debian's) in TCP mode in front of the broker's HTTPS listener, as an L4 load balancer that passes TLS
/// through: each frontend claims its clients come from one address (`tcp-request connection set-src`) and sends
/// that address in a PROXY header of one version.
final class HAProxyUnderTest: Sendable {
    struct Frontend {
        /// `send-proxy` (version 1) or `send-proxy-v2`.
        var header: String
        /// HAProxy's sample expression for the client address: `ipv4(203.0.113.7)`, `ipv6(2001:db8::9)`.
        var client: String
    }

    let process: Process
    let ports: [Int]

    private init(process: Process, ports: [Int]) {
        self.process = process
        self.ports = ports
    }

    static func start(backend: Int, frontends: [Frontend], directory: String) async throws -> HAProxyUnderTest {
        var ports: [Int] = []
        for _ in frontends { ports.append(try await freePort()) }
        var configuration = """
            defaults
                mode tcp
                timeout connect 5s
                timeout client 60s
                timeout server 60s

            """
        for (index, frontend) in frontends.enumerated() {
            configuration += """
                frontend f\(index)
                    bind 127.0.0.1:\(ports[index])
                    tcp-request connection set-src \(frontend.client)
                    default_backend b\(index)
                backend b\(index)
                    server broker 127.0.0.1:\(backend) \(frontend.header)

                """
        }
        let file = directory + "/haproxy.cfg"
        try configuration.write(toFile: file, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/haproxy")
        process.arguments = ["-f", file, "-db"]
        _ = FileManager.default.createFile(atPath: directory + "/haproxy.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/haproxy.log"))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        let haproxy = HAProxyUnderTest(process: process, ports: ports)
        // Listening once every frontend accepts a connection (each probe reaches the broker as a header and a drop).
        for port in ports {
            _ = try await eventually {
                guard process.isRunning else { return true }
                let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: "127.0.0.1", port: port).get()
                try? await channel?.close()
                return channel != nil
            }
        }
        guard process.isRunning else {
            let output = (try? String(contentsOfFile: directory + "/haproxy.log", encoding: .utf8)) ?? ""
            throw HAProxyFailed(output: output)
        }
        return haproxy
    }

    struct HAProxyFailed: Error { var output: String }

    func stop() async {
        process.terminate()
        await process.exited()
    }

    static func freePort() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }
}

@Suite("PROXY protocol behind an L4 load balancer", .timeLimit(.minutes(3)))
struct ProxyProtocolTests {
    static func v1(_ client: String, port: Int = 51_000) -> [UInt8] {
        let family = client.contains(":") ? "TCP6" : "TCP4"
        let destination = client.contains(":") ? "::1" : "127.0.0.1"
        return Array("PROXY \(family) \(client) \(destination) \(port) 443\r\n".utf8)
    }

    static func v2(
        command: UInt8 = 0x1,
        family: UInt8 = 0x11,
        addresses: [UInt8],
        extensions: [UInt8] = []
    )
        -> [UInt8]
    {
        let length = addresses.count + extensions.count
        return ProxyHeader.v2Signature + [0x20 | command, family, UInt8(length >> 8), UInt8(length & 0xFF)]
            + addresses + extensions
    }

    /// 203.0.113.7:51000 to 127.0.0.1:443.
    static let v2IPv4 = v2(addresses: [203, 0, 113, 7, 127, 0, 0, 1, 0xC7, 0x38, 0x01, 0xBB])

    static func client(_ header: [UInt8]) -> ProxyHeader {
        ProxyHeader.parse(ByteBuffer(bytes: header))
    }

    @Test("Headers of both versions read whole and wait when cut anywhere; malformed and oversized ones are refused")
    func parse() throws {
        let ipv4 = try SocketAddress(ipAddress: "203.0.113.7", port: 51_000)
        let ipv6 = try SocketAddress(ipAddress: "2001:db8::9", port: 51_000)
        let tls: [UInt8] = [0x16, 0x03, 0x01]
        let v1 = Self.v1("203.0.113.7")
        #expect(ProxyHeader.parse(ByteBuffer(bytes: v1 + tls)) == .header(length: v1.count, client: ipv4))
        #expect(Self.client(Self.v1("2001:db8::9")) == .header(length: Self.v1("2001:db8::9").count, client: ipv6))
        #expect(Self.client(Array("PROXY UNKNOWN\r\n".utf8)) == .header(length: 15, client: nil))
        let v2 = Self.v2IPv4
        #expect(ProxyHeader.parse(ByteBuffer(bytes: v2 + tls)) == .header(length: v2.count, client: ipv4))
        let v2IPv6 = Self.v2(
            family: 0x21,
            addresses: [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [9]
                + [UInt8](repeating: 0, count: 15) + [1] + [0xC7, 0x38, 0x01, 0xBB],
            // An extension (a TLV this broker does not read) is skipped with the header.
            extensions: [0x04, 0x00, 0x02, 0xAB, 0xCD]
        )
        #expect(Self.client(v2IPv6) == .header(length: v2IPv6.count, client: ipv6))
        // LOCAL (the balancer's health check) and an unspecified family name no client.
        #expect(Self.client(Self.v2(command: 0x0, family: 0x00, addresses: [])) == .header(length: 16, client: nil))
        #expect(Self.client(Self.v2(family: 0x00, addresses: [])) == .header(length: 16, client: nil))
        // Cut anywhere, a header is waited for; a prefix of garbage is not.
        for header in [v1, v2, v2IPv6] {
            for cut in 0..<header.count {
                #expect(Self.client(Array(header.prefix(cut))) == .incomplete, "cut at \(cut)")
            }
        }
        func refused(_ bytes: [UInt8]) -> Bool {
            if case .invalid = Self.client(bytes) { return true }
            return false
        }
        #expect(refused(tls + [0x00, 0x01]))
        #expect(refused(Array("GET / HTTP/1.1\r\n".utf8)))
        #expect(refused(Array("PROXY TCP4 203.0.113.7 127.0.0.1 51000 443\n".utf8)))
        #expect(refused(Array("PROXY TCP4 2001:db8::9 127.0.0.1 51000 443\r\n".utf8)))
        #expect(refused(Array("PROXY TCP4 203.0.113.7 127.0.0.1 70000 443\r\n".utf8)))
        #expect(refused(Array("PROXY TCP4 203.0.113.700 127.0.0.1 51000 443\r\n".utf8)))
        #expect(refused(Array("PROXY TCP4 203.0.113.7 127.0.0.1 51000\r\n".utf8)))
        #expect(refused(Array(("PROXY TCP4 " + String(repeating: "1", count: 120)).utf8)))
        #expect(refused(ProxyHeader.v2Signature + [0x21, 0x11, 0xFF, 0xFF]))
        #expect(refused(ProxyHeader.v2Signature + [0x11, 0x11, 0x00, 0x0C]))
        #expect(refused(ProxyHeader.v2Signature + [0x22, 0x11, 0x00, 0x00]))
        #expect(refused(Self.v2(addresses: [203, 0, 113, 7])))
    }

    @Test(
        "HAProxy's version 1 and 2 headers name the client: each has its own login limit, over HTTP/2 and HTTP/1.1",
        arguments: [false, true]
    )
    func haproxy(http1Only: Bool) async throws {
        let loopback = try #require(NetworkRange(cidr: "127.0.0.1/32"))
        try await TestBroker.run(
            http1Only: http1Only,
            trustedProxies: [loopback],
            proxyProtocol: true,
            loginAddressLimit: 5,
            loginAddressLeak: .seconds(600)
        ) { broker in
            let haproxy = try await HAProxyUnderTest.start(
                backend: broker.httpsPort,
                frontends: [
                    .init(header: "send-proxy", client: "ipv4(203.0.113.7)"),
                    .init(header: "send-proxy-v2", client: "ipv4(203.0.113.8)"),
                    .init(header: "send-proxy-v2", client: "ipv6(2001:db8::9)"),
                ],
                directory: broker.directory
            )
            do {
                for port in haproxy.ports {
                    let reply = try await broker.send(.GET, "/v1/me", via: port)
                    #expect(reply.status == 200, "\(reply.text)")
                    #expect(reply.version == (http1Only ? .http1_1 : .http2))
                }
                // Six wrong passwords from each client: all answered 401, although all eighteen come from one TCP
                // peer (127.0.0.1) and an address's limit is five: each client is counted apart.
                for (index, port) in haproxy.ports.enumerated() {
                    for attempt in 0..<6 {
                        let reply = try await broker.send(
                            .GET,
                            "/v1/me",
                            user: "nobody\(index)-\(attempt)",
                            password: "wrong",
                            via: port
                        )
                        #expect(reply.status == 401, "\(reply.status) \(reply.text)")
                    }
                }
                // And each is over its limit now.
                for port in haproxy.ports {
                    let refused = try await broker.send(.GET, "/v1/me", user: "bob", password: "wrong", via: port)
                    #expect(refused.status == 429, "\(refused.text)")
                }
            } catch {
                await haproxy.stop()
                throw error
            }
            await haproxy.stop()
        }
    }

    @Test(
        "A trusted proxy's header that stalls is cut at the handshake deadline; a dropped, malformed, oversized or missing one closes the connection; other peers connect directly"
    )
    func misbehaving() async throws {
        let loopback = try #require(NetworkRange(cidr: "127.0.0.1/32"))
        try await TestBroker.run(
            trustedProxies: [loopback],
            proxyProtocol: true,
            // Long enough that a loaded machine (the whole suite on two cores) writes each header before it ends.
            connectionLimits: ConnectionLimits(handshakeTimeout: .seconds(5))
        ) { broker in
            let port = broker.httpsPort
            let stalled = try await RawHTTP2Client.connect(port: port, preface: false, tls: false)
            try? await stalled.send(Array("PROXY TCP4 203.0.".utf8))
            let dropped = try await RawHTTP2Client.connect(port: port, preface: false, tls: false)
            try? await dropped.send(Array(ProxyHeader.v2Signature.prefix(8)))
            await dropped.close()
            var refused: [RawHTTP2Client] = []
            for bytes in [
                Array("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8),
                ProxyHeader.v2Signature + [0x21, 0x11, 0xFF, 0xFF],
                Array("PROXY TCP4 203.0.113.7 127.0.0.1 99999 443\r\n".utf8),
            ] {
                let client = try await RawHTTP2Client.connect(port: port, preface: false, tls: false)
                // (Closed already if the machine was slow to write: the outcome below is the same.)
                try? await client.send(bytes)
                refused.append(client)
            }
            // A trusted proxy's TLS without a header first (a balancer configured without send-proxy).
            refused.append(try await RawHTTP2Client.connect(port: port, preface: false))
            for client in refused {
                #expect(try await client.wait(seconds: 20) { _ in false } == false)
                #expect(client.isClosed)
                #expect(client.frames.isEmpty)
            }
            // The stalled header is cut at the handshake deadline.
            #expect(try await eventually { stalled.isClosed })
            // A peer that is not a trusted proxy connects directly, with no header.
            let direct = try await RawHTTP2Client.connect(port: port, from: "127.0.0.2")
            #expect(try await direct.wait { $0.contains { $0.type == RawHTTP2Client.Frame.settings } })
            await direct.close()
            // And the node serves proxied HTTP/2 and HTTP/1.1 after all of it.
            try await Self.expectServed(port: port, header: Self.v1("203.0.113.7"))
            try await Self.expectServed(port: port, header: Self.v2IPv4, http1: true)
        }
    }

    @Test("maxConnectionsPerAddress counts the clients the headers name, not the trusted proxy they come through")
    func connectionLimit() async throws {
        let loopback = try #require(NetworkRange(cidr: "127.0.0.1/32"))
        try await TestBroker.run(
            trustedProxies: [loopback],
            proxyProtocol: true,
            connectionLimits: ConnectionLimits(maxConnectionsPerAddress: 2)
        ) { broker in
            var open: [RawHTTP2Client] = []
            // Four clients through one proxy address: four connections, all served (the proxy is not limited).
            for client in ["203.0.113.7", "203.0.113.8", "203.0.113.9", "2001:db8::9"] {
                let connection = try await RawHTTP2Client.connect(port: broker.httpsPort, proxyHeader: Self.v1(client))
                #expect(try await connection.wait { $0.contains { $0.type == RawHTTP2Client.Frame.settings } })
                open.append(connection)
            }
            // A client's third connection is one too many: closed before TLS.
            let second = try await RawHTTP2Client.connect(port: broker.httpsPort, proxyHeader: Self.v1("203.0.113.7"))
            #expect(try await second.wait { $0.contains { $0.type == RawHTTP2Client.Frame.settings } })
            open.append(second)
            // (Closed as the header arrives: the client may see it while it starts TLS, or after.)
            if let third = try? await RawHTTP2Client.connect(port: broker.httpsPort, proxyHeader: Self.v2IPv4) {
                #expect(try await eventually { third.isClosed })
                #expect(third.frames.isEmpty)
            }
            // Closing one makes room again.
            await second.close()
            #expect(
                try await eventually {
                    let next = try await RawHTTP2Client.connect(
                        port: broker.httpsPort,
                        proxyHeader: Self.v1("203.0.113.7")
                    )
                    let served = try await next.wait(seconds: 5) {
                        $0.contains { $0.type == RawHTTP2Client.Frame.settings }
                    }
                    await next.close()
                    return served
                }
            )
            for connection in open { await connection.close() }
        }
    }

    @Test("proxyProtocol without trustedProxies is refused at start, with what to set")
    func needsTrustedProxies() async throws {
        let data = TestBroker.temporaryDirectory()
        let result = try await BrokerProcess.run(
            ["tenant", "list"],
            dataDirectory: data,
            environment: ["BROKER_PROXY_PROTOCOL": "on"]
        )
        #expect(result.status != 0 && result.error.contains("proxyProtocol needs trustedProxies"), "\(result.error)")
        let bad = try await BrokerProcess.run(
            ["tenant", "list"],
            dataDirectory: data,
            environment: ["BROKER_PROXY_PROTOCOL": "yes", "BROKER_TRUSTED_PROXIES": "10.0.0.0/8"]
        )
        #expect(bad.status != 0 && bad.error.contains("BROKER_PROXY_PROTOCOL must be on or off"), "\(bad.error)")
    }

    /// A proxied connection that gets an answer to an authenticated request: HTTP/2 (the server's SETTINGS and a
    /// 200 HEADERS frame) or HTTP/1.1 (a 200 status line).
    static func expectServed(port: Int, header: [UInt8], http1: Bool = false) async throws {
        let credentials = Data("alice:\(Fixture.alicePassword)".utf8).base64EncodedString()
        if http1 {
            let client = try await RawHTTP2Client.connect(
                port: port,
                preface: false,
                alpn: ["http/1.1"],
                proxyHeader: header
            )
            try await client.send(
                Array("GET /v1/me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic \(credentials)\r\n\r\n".utf8)
            )
            #expect(
                try await eventually {
                    String(decoding: client.receivedBytes, as: UTF8.self).hasPrefix("HTTP/1.1 200") || client.isClosed
                }
            )
            #expect(String(decoding: client.receivedBytes, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
            await client.close()
        } else {
            let client = try await RawHTTP2Client.connect(port: port, proxyHeader: header)
            try await client.send(
                RawHTTP2Client.headers(
                    stream: 1,
                    RawHTTP2Client.request(
                        "GET",
                        "/v1/me",
                        authority: "127.0.0.1",
                        [("authorization", "Basic \(credentials)")]
                    )
                )
            )
            #expect(
                try await client.wait {
                    $0.contains { $0.type == RawHTTP2Client.Frame.headers && $0.stream == 1 }
                }
            )
            let blocks = RawHTTP2Client.decodeHeaderBlocks(client.frames)
            let status = blocks.first { $0.0 == 1 }?.1.first { $0.0 == ":status" }?.1
            #expect(status == "200")
            await client.close()
        }
    }
}
