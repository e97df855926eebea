import Crypto
import Engine
import Foundation
import NIOConcurrencyHelpers
import TestSupport
import Testing

@testable import Gateway

/// Provider tokens shared by the nodes of a deployment through a real store: each cache here is one node (its
/// own process memory), on one SQLite file or one PostgreSQL database, on a clock the test moves.
@Suite("Provider tokens shared through the store")
struct ProviderTokenSharingTests {
    static func store(_ database: TestDatabase) async throws -> any BrokerStore {
        switch database {
        case .sqlite:
            return try await SQLiteStore(
                configuration: .init(path: TestBroker.temporaryDirectory() + "/broker.sqlite"),
                logger: TestBroker.logger
            )
        case .postgres:
            let url = try await PostgresTestDatabases.make()
            return try await PostgresStore(
                configuration: try PostgresStoreConfiguration(url: url + "?sslmode=disable"),
                logger: TestBroker.logger
            )
        }
    }

    @Test(
        "Three nodes send one token per key: the first publishes, the others take it, a refresh is made once",
        arguments: TestDatabase.allCases
    )
    func oneTokenPerKey(_ database: TestDatabase) async throws {
        let store = try await Self.store(database)
        defer { Task { await store.close() } }
        let clock = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
        let identity = APNsSigningIdentity(teamID: "TEAM000001", keyID: "KEY0000001", key: .init())
        let nodes = (0..<3).map { _ in
            ProviderTokenCache(identity: identity, store: store, now: { clock.withLockedValue { $0 } })
        }
        let first = try await nodes[0].token()
        #expect(try await nodes[1].token() == first)
        #expect(try await nodes[2].token() == first)
        #expect(try await store.providerToken(teamID: "TEAM000001", keyID: "KEY0000001")?.token == first)

        // 46 minutes on, every node refreshes at once: one new token wins, and all of them send it.
        clock.withLockedValue { $0 += 46 * 60 }
        let refreshed = try await withThrowingTaskGroup(of: String.self) { group in
            for node in nodes { group.addTask { try await node.token() } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(refreshed.count == 1 && !refreshed.contains(first), "\(refreshed.count) tokens")
        let second = try #require(refreshed.first)
        let claims = try ProviderJWT.verify(second) { $0 == "KEY0000001" ? identity.publicKey : nil }
        #expect(claims.issuedAt == clock.withLockedValue { $0 })

        // APNs calls the token expired at one node 4 minutes later: too young to renew, and no node does.
        clock.withLockedValue { $0 += 4 * 60 }
        #expect(try await nodes[1].renew() == false)
        #expect(try await nodes[0].token() == second)
        // 21 minutes after the refresh: one node renews, and another node asked to renew takes its token.
        clock.withLockedValue { $0 += 17 * 60 }
        #expect(try await nodes[1].renew() == true)
        let third = try await nodes[1].token()
        #expect(third != second)
        #expect(try await nodes[2].renew() == true)
        #expect(try await nodes[2].token() == third)
        // Node 0 still sends the second token (20 minutes old) until its own refresh; then it takes the third.
        #expect(try await nodes[0].token() == second)
        clock.withLockedValue { $0 += 25 * 60 }
        #expect(try await nodes[0].token() == third)
    }

    @Test(
        "A stored token signed by another key under the same ids is replaced, never sent",
        arguments: [TestDatabase.sqlite]
    )
    func foreignToken(_ database: TestDatabase) async throws {
        let store = try await Self.store(database)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let other = APNsSigningIdentity(teamID: "TEAM000001", keyID: "KEY0000001", key: .init())
        let foreign = try ProviderJWT.sign(other, issuedAt: now)
        _ = try await store.publishProviderToken(
            teamID: "TEAM000001",
            keyID: "KEY0000001",
            candidate: SharedProviderToken(token: foreign, issuedAt: now),
            replacing: nil
        )
        let identity = APNsSigningIdentity(teamID: "TEAM000001", keyID: "KEY0000001", key: .init())
        let cache = ProviderTokenCache(identity: identity, store: store, now: { now.addingTimeInterval(60) })
        let token = try await cache.token()
        #expect(token != foreign)
        #expect(try ProviderJWT.verify(token) { _ in identity.publicKey }.teamID == "TEAM000001")
        #expect(try await store.providerToken(teamID: "TEAM000001", keyID: "KEY0000001")?.token == token)
    }
}
