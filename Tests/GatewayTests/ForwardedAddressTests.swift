import Engine
import Foundation
import NIOCore
import Testing

@testable import Gateway

/// Login throttling by client address behind a load balancer: `X-Forwarded-For` names the client when the peer is
/// a trusted proxy, and only then.
@Suite("Client addresses behind a proxy", .timeLimit(.minutes(2)))
struct ForwardedAddressTests {
    /// Wrong passwords for other usernames, from one forwarded address. (Six for a limit of five: the first five
    /// have leaked a little by the sixth, which still gets in and takes the address over its limit.)
    func fail(_ broker: TestBroker, times: Int, from address: String) async throws {
        for attempt in 0..<times {
            let reply = try await login(broker, "nobody\(attempt)", forwardedFor: address)
            #expect(reply.status == 401, "\(reply.status) \(reply.text)")
        }
    }

    /// A wrong password for `user`, with `X-Forwarded-For: forwardedFor`.
    func login(_ broker: TestBroker, _ user: String, forwardedFor: String) async throws -> TestBroker.Reply {
        try await broker.send(
            .GET,
            "/v1/me",
            user: user,
            password: "wrong",
            headers: [("X-Forwarded-For", forwardedFor)]
        )
    }

    @Test("Behind a trusted proxy each forwarded client has its own limit; a spoofed left entry changes nothing")
    func trustedProxy() async throws {
        let loopback = try #require(NetworkRange(cidr: "127.0.0.0/8"))
        // A point comes back every ten minutes: nothing leaks away while the test runs.
        try await TestBroker.run(trustedProxies: [loopback], loginAddressLimit: 5, loginAddressLeak: .seconds(600)) {
            broker in
            try await fail(broker, times: 6, from: "203.0.113.7")
            let refused = try await login(broker, "bob", forwardedFor: "203.0.113.7")
            #expect(refused.status == 429, "\(refused.text)")
            // Another client behind the same proxy (the same TCP peer) is not refused.
            let other = try await login(broker, "bob", forwardedFor: "203.0.113.8")
            #expect(other.status == 401)
            // What the client wrote on the left is not believed: the proxy's entry on the right counts.
            let spoofed = try await login(broker, "bob", forwardedFor: "192.0.2.99, 203.0.113.7")
            #expect(spoofed.status == 429)
        }
    }

    @Test("Without trusted proxies, X-Forwarded-For is ignored: the peer's address counts")
    func untrusted() async throws {
        try await TestBroker.run(loginAddressLimit: 5, loginAddressLeak: .seconds(600)) { broker in
            try await fail(broker, times: 6, from: "203.0.113.7")
            let other = try await login(broker, "bob", forwardedFor: "203.0.113.8")
            #expect(other.status == 429)
        }
    }

    @Test("CIDR ranges and forwarded chains are read as written")
    func ranges() throws {
        let range = try #require(NetworkRange(cidr: "10.0.0.0/8"))
        #expect(range.contains(try #require(NetworkAddress(literal: "10.200.1.2"))))
        #expect(!range.contains(try #require(NetworkAddress(literal: "11.0.0.1"))))
        #expect(NetworkRange(cidr: "fd00::/8")?.contains(try #require(NetworkAddress(literal: "fd12::1"))) == true)
        #expect(NetworkRange(cidr: "10.0.0.0/33") == nil && NetworkRange(cidr: "proxy") == nil)
        let proxies = [range]
        #expect(
            ClientAddress.key(peer: nil, forwardedFor: "1.2.3.4", trustedProxies: proxies, scheme: "http") == nil
        )
        // Two proxies deep: the right-most address that is not a proxy is the client.
        let peer = try SocketAddressFixture.v4("10.0.0.5")
        #expect(
            ClientAddress.key(
                peer: peer,
                forwardedFor: "9.9.9.9, 198.51.100.4, 10.1.1.1",
                trustedProxies: proxies,
                scheme: "http"
            ) == "198.51.100.4"
        )
        #expect(
            ClientAddress.key(peer: peer, forwardedFor: "2001:db8:1:2::9", trustedProxies: proxies, scheme: "http")
                == "20:1:d:b8:0:1:0:2::/64"
        )
    }
}

enum SocketAddressFixture {
    static func v4(_ text: String) throws -> NIOCore.SocketAddress { try .init(ipAddress: text, port: 443) }
}
