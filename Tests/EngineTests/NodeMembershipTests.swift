import Foundation
import TestSupport
import Testing

@testable import Engine

/// Nodes on one PostgreSQL database keeping their claims and leases by a heartbeat, on a clock the test moves:
/// a silent node's work comes free after `nodeSilence`, long before its claims and leases (of ten minutes) end.
@Suite("Node heartbeats on one PostgreSQL database", .timeLimit(.minutes(2)))
struct NodeMembershipTests {
    /// A node on the fixture's database: claims and leases of ten minutes, silence of 10 s.
    func node(_ f: StoreFixture) async throws -> PostgresStore {
        var configuration = try StoreFixture.sharedConfiguration(f.location)
        configuration.claimTime = .seconds(600)
        configuration.leaseTime = .seconds(600)
        configuration.nodeSilence = .seconds(10)
        return try await PostgresStore(configuration: configuration, logger: StoreFixture.logger)
    }

    /// One delivery awaiting its push, recorded (and so leased) by `node`.
    func leaseOne(_ f: StoreFixture, to node: PostgresStore) async throws -> [Delivery] {
        try await node.recordDeliveries([
            NewDelivery(
                tenant: f.acme,
                user: f.a.id,
                impulse: try ImpulseID("one"),
                kind: .manual,
                assignedAt: Date(),
                awaitsPush: true
            )
        ])
    }

    /// The node ids of a heartbeat's `id@start` identities.
    func ids(_ live: Set<String>) -> Set<String> {
        Set(live.map { String($0.split(separator: "@")[0]) })
    }

    @Test("A node that hands its work back (it cannot push) frees it at once and appears anew, so others sweep")
    func handBack() async throws {
        let f = try await StoreFixture.make(.postgres)
        let failing = try await node(f)
        let healthy = try await node(f)
        let t0 = Date()
        _ = try await failing.heartbeat(host: "a", now: t0)
        let before = try await healthy.heartbeat(host: "b", now: t0).live
        #expect(try await failing.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        let recorded = try await leaseOne(f, to: failing)
        let since = Date().addingTimeInterval(-3600)
        #expect(try await healthy.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10).isEmpty)
        #expect(try await failing.handBackWork() == EndedNode(id: failing.nodeID, claims: 3, leases: 1))
        #expect(try await healthy.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        let taken = try await healthy.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10)
        #expect(taken.map(\.id) == recorded.map(\.id))
        // Its next heartbeat records it again, as a new start: the other node's heartbeat sees the old one gone.
        _ = try await failing.heartbeat(host: "a", now: t0.addingTimeInterval(1))
        let after = try await healthy.heartbeat(host: "b", now: t0.addingTimeInterval(1)).live
        #expect(after.count == 2 && !before.subtracting(after).isEmpty)
        #expect(ids(after) == ids(before))
    }

    @Test("A node silent for longer than nodeSilence loses its claims and leases to the next heartbeat of another")
    func silentNode() async throws {
        let f = try await StoreFixture.make(.postgres)
        let dying = try await node(f)
        let survivor = try await node(f)
        let t0 = Date()
        #expect(ids(try await dying.heartbeat(host: "a", now: t0).live) == [dying.nodeID])
        #expect(ids(try await survivor.heartbeat(host: "b", now: t0).live) == [dying.nodeID, survivor.nodeID])
        // The dying node claims every due row and holds a delivery being pushed.
        #expect(try await dying.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        let recorded = try await leaseOne(f, to: dying)
        let since = Date().addingTimeInterval(-3600)
        #expect(try await survivor.dueSchedules(notAfter: Date(), limit: 10).isEmpty)
        #expect(try await survivor.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10).isEmpty)

        // 9 s without a heartbeat: still alive.
        let early = try await survivor.heartbeat(host: "b", now: t0.addingTimeInterval(9))
        #expect(early.ended.isEmpty && early.live.count == 2)
        #expect(try await survivor.dueSchedules(notAfter: Date(), limit: 10).isEmpty)
        // 11 s: ended; its three claims and one lease are free now, ten minutes before they would end.
        let late = try await survivor.heartbeat(host: "b", now: t0.addingTimeInterval(11))
        #expect(late.ended == [EndedNode(id: dying.nodeID, claims: 3, leases: 1)])
        #expect(ids(late.live) == [survivor.nodeID])
        #expect(try await survivor.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        let taken = try await survivor.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10)
        #expect(taken.map(\.id) == recorded.map(\.id))
        // A node that comes back after being ended keeps a heartbeat again (its old work is gone).
        #expect(try await dying.heartbeat(host: "a", now: t0.addingTimeInterval(12)).live.count == 2)
        #expect(try await survivor.nodes().map(\.host).sorted() == ["a", "b"])
    }

    @Test("A node ended by name (a restart's previous run, or its own graceful stop) frees its work at once")
    func endByName() async throws {
        let f = try await StoreFixture.make(.postgres)
        let previous = try await node(f)
        let other = try await node(f)
        _ = try await previous.heartbeat(host: "a", now: Date())
        #expect(try await previous.dueSchedules(notAfter: Date(), limit: 2).count == 2)
        #expect(try await other.dueSchedules(notAfter: Date(), limit: 10).count == 1)
        #expect(try await other.endNode(previous.nodeID) == EndedNode(id: previous.nodeID, claims: 2, leases: 0))
        #expect(try await other.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        #expect(try await other.nodes().isEmpty)
        // Nothing left to end: ending again is harmless.
        #expect(try await other.endNode(previous.nodeID) == EndedNode(id: previous.nodeID, claims: 0, leases: 0))
    }
}
