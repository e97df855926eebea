import Engine
import Foundation
import GRDB
import TestSupport
import Testing

@testable import Gateway

@Suite("Change feed follower")
struct ChangeFeedFollowerTests {
    @Test("Its housekeeping deletes the devices APNs reported gone, and no other")
    func purgesGoneDevices() async throws {
        try await TestBroker.run { broker in
            let store = broker.store
            let tenant = try #require(try await store.tenant(Fixture.acme))
            let alice = try #require(try await store.user(tenant: Fixture.acme, username: "alice"))
            let tokens = try ["0a", "0b"].map { try DeviceToken(String(repeating: $0, count: 32)) }
            _ = try await store.registerDevices(
                try tokens.map {
                    try Device(
                        tenant: tenant.id,
                        topic: tenant.apnsTopic,
                        token: $0,
                        owner: alice.id,
                        name: "phone",
                        environment: .production,
                        registeredAt: Date(timeIntervalSince1970: 1000)
                    )
                }
            )
            let gone = TokenVerdict(token: tokens[0], kind: .remove(registeredBefore: .distantFuture))
            #expect(try await store.applyTokenVerdicts(tenant: tenant.id, topic: tenant.apnsTopic, [gone]) == [true])
            let database = try DatabaseQueue(path: broker.directory + "/broker.sqlite")
            @Sendable func rows() throws -> [String] {
                try database.read {
                    try String.fetchAll(
                        $0,
                        sql: "SELECT token FROM devices WHERE token IN (?, ?)",
                        arguments: [
                            tokens[0].rawValue, tokens[1].rawValue,
                        ]
                    )
                }
            }
            #expect(try rows().count == 2)  // the gone one is only marked
            // Housekeeping on every round (a retention of zero), as the broker does every ten minutes.
            let follower = ChangeFeedFollower(
                store: store,
                caches: CacheInvalidation(
                    authenticator: Authenticator(store: store, cacheTTL: .seconds(1)),
                    ledger: broker.application.ledger,
                    gateway: nil
                ),
                interval: .milliseconds(20),
                retention: .zero,
                logger: TestBroker.logger
            )
            let running = Task { try await follower.run() }
            defer { running.cancel() }
            #expect(try await eventually(seconds: 10) { try rows() == [tokens[1].rawValue] })
        }
    }

    @Test("A tenant's settings changed by another process reach the cached tenant through the feed")
    func tenantChanges() async throws {
        try await TestBroker.run { broker in
            // A process's cache of its own, with a TTL no test waits for: only the feed can refresh it.
            let ledger = DeliveryLedger(
                store: broker.store,
                catalog: CatalogCache(store: broker.store, ttl: .seconds(3600))
            )
            let tenants = TenantDirectory(catalog: ledger.catalog, defaultTenant: nil)
            #expect(try await tenants.resolve("acme").pushExpiry == .endOfDay)
            let follower = ChangeFeedFollower(
                store: broker.store,
                caches: CacheInvalidation(
                    authenticator: Authenticator(store: broker.store, cacheTTL: .seconds(1)),
                    ledger: ledger,
                    gateway: nil
                ),
                interval: .milliseconds(20),
                retention: .seconds(600),
                logger: TestBroker.logger
            )
            let running = Task { try await follower.run() }
            defer { running.cancel() }
            // `broker tenant update` in another process: a store of its own on the same file. The follower starts
            // after the changes already in the feed, and when it does is not visible from here: the update is
            // repeated until one comes after its start.
            let admin = try await SQLiteStore(
                configuration: .init(path: broker.directory + "/broker.sqlite"),
                logger: TestBroker.logger
            )
            #expect(
                try await eventually(seconds: 20) {
                    try await admin.setPushExpiry(tenant: Fixture.acme, .immediate)
                    try await Task.sleep(for: .milliseconds(50))
                    return try await tenants.resolve("acme").pushExpiry == .immediate
                }
            )
        }
    }
}
