import Foundation
import Testing

@testable import Engine

/// The push gateway's queues as a value: no actor, no clock, no store.
@Suite("Push queues")
struct PushQueuesTests {
    static let acme = try! TenantID("acme")
    static let globex = try! TenantID("globex")

    static func delivery(_ id: Int64, _ tenant: TenantID = acme) -> Delivery {
        Delivery(
            id: DeliveryID(id),
            tenant: tenant,
            user: UserID(id),
            impulse: try! ImpulseID("one"),
            kind: .manual,
            localDate: nil,
            assignedAt: Date(timeIntervalSince1970: 0)
        )
    }

    static func ids(_ batch: (tenant: TenantID, jobs: [PushQueues.Job])?) -> [Int64] {
        batch?.jobs.map(\.delivery.id.rawValue) ?? []
    }

    @Test("Tenants are served in turn, a batch at a time and of one tenant; duplicates are ignored while pending")
    func rotation() {
        var queues = PushQueues(capacityPerTenant: 10)
        let items =
            (1...5).map { (Self.delivery($0), nil as PushTarget?) } + [(Self.delivery(1), nil)]
            + (6...7).map { (Self.delivery($0, Self.globex), nil as PushTarget?) }
        var next = 0
        var added = 0
        while next < items.count {
            let run = queues.appendRun(items, from: next)
            (next, added) = (run.next, added + run.added)
        }
        #expect(added == 7)  // the second delivery 1 is already pending
        #expect(queues.depths == [Self.acme: 5, Self.globex: 2])
        let first = queues.takeBatch(2)
        #expect(first?.tenant == Self.acme && Self.ids(first) == [1, 2])
        let taken1 = queues.takeBatch(2)
        #expect(Self.ids(taken1) == [6, 7])
        let taken2 = queues.takeBatch(2)
        #expect(Self.ids(taken2) == [3, 4])
        // globex's queue ran empty: it leaves the rotation; acme's last delivery comes next.
        let taken3 = queues.takeBatch(2)
        #expect(Self.ids(taken3) == [5])
        let taken4 = queues.takeBatch(2)
        #expect(taken4 == nil)
        // Taken but not finished: still pending, so a sweep's second enqueue is ignored.
        let again = queues.append(Self.delivery(3), target: nil)
        #expect(!again)
        queues.finished(DeliveryID(3))
        let afterFinish = queues.append(Self.delivery(3), target: nil)
        #expect(afterFinish)
        #expect(queues.depths == [Self.acme: 1, Self.globex: 0])
    }

    @Test("A run stops at the tenant's room; the room counts queued deliveries, not those in flight")
    func room() {
        var queues = PushQueues(capacityPerTenant: 3)
        let items = (1...5).map { (Self.delivery($0), nil as PushTarget?) }
        let run = queues.appendRun(items, from: 0)
        #expect(run == (next: 3, added: 3) && queues.room(Self.acme) == 0)
        _ = queues.takeBatch(2)
        #expect(queues.room(Self.acme) == 2)
        let taken5 = queues.appendRun(items, from: 3)
        #expect(taken5 == (next: 5, added: 2))
    }

    @Test("A paused tenant is skipped; the delivery its pause met goes back once, stays pending, and moves on resume")
    func pause() {
        var queues = PushQueues(capacityPerTenant: 10)
        for id in Int64(1)...3 { _ = queues.append(Self.delivery(id), target: nil) }
        _ = queues.append(Self.delivery(9, Self.globex), target: nil)
        let batch = queues.takeBatch(2)
        #expect(Self.ids(batch) == [1, 2])
        // Two devices of delivery 1 met the refused credential: it goes back once, at the head.
        let first = queues.pause(Self.acme, reason: "InvalidProviderToken", requeue: Self.delivery(1))
        let second = queues.pause(Self.acme, reason: "InvalidProviderToken", requeue: Self.delivery(1))
        #expect(first && !second)
        queues.finished(DeliveryID(1))
        queues.finished(DeliveryID(2))
        #expect(queues.isPending(DeliveryID(1)) && !queues.isPending(DeliveryID(2)))
        #expect(queues.paused == [Self.acme: "InvalidProviderToken"])
        // Only globex is served; acme's queue waits for an operator.
        let taken6 = queues.takeBatch(5)
        #expect(Self.ids(taken6) == [9])
        let taken7 = queues.takeBatch(5)
        #expect(taken7 == nil)
        #expect(queues.onlyPausedWait)
        queues.resume(Self.acme)
        #expect(!queues.onlyPausedWait)
        let taken8 = queues.takeBatch(5)
        #expect(Self.ids(taken8) == [1, 3])
    }

    @Test("Dropping everything empties the queues and the pending set, but not what is in flight")
    func drop() {
        var queues = PushQueues(capacityPerTenant: 10)
        for id in Int64(1)...4 { _ = queues.append(Self.delivery(id), target: nil) }
        let inFlight = queues.takeBatch(1)
        let dropped = queues.dropAll()
        #expect(dropped == 3)
        let taken9 = queues.takeBatch(5)
        #expect(taken9 == nil && queues.depths == [Self.acme: 0])
        #expect(queues.isPending(DeliveryID(1)) && !queues.isPending(DeliveryID(2)))
        #expect(Self.ids(inFlight) == [1])
        let requeued = queues.append(Self.delivery(2), target: nil)
        #expect(requeued)
    }
}

@Suite("Push resends")
struct PushResendsTests {
    @Test("Resends fall due in time, are taken in batch order with their attempts, and are all given up on a stop")
    func dueInOrder() {
        let start = Date(timeIntervalSince1970: 1_000)
        var resends = PushResends()
        #expect(resends.isEmpty && resends.nextDue == nil)
        resends.schedule(4, attempt: 2, after: .seconds(2), from: start)
        resends.schedule(1, attempt: 3, after: .milliseconds(500), from: start)
        resends.schedule(2, attempt: 2, after: .seconds(2), from: start)
        resends.schedule(7, attempt: 2, after: .seconds(-1), from: start)  // a negative delay is due at once
        #expect(resends.nextDue == start)
        #expect(resends.takeDue(at: start).map(\.position) == [7])
        #expect(resends.nextDue == start.addingTimeInterval(0.5))
        #expect(resends.takeDue(at: start.addingTimeInterval(0.4)).isEmpty)
        let later = resends.takeDue(at: start.addingTimeInterval(2))
        #expect(later.map(\.position) == [1, 2, 4] && later.map(\.attempt) == [3, 2, 2])
        #expect(resends.isEmpty)
        resends.schedule(5, attempt: 4, after: .seconds(30), from: start)
        resends.schedule(3, attempt: 2, after: .seconds(60), from: start)
        #expect(resends.takeAll().map(\.position) == [3, 5])
        #expect(resends.isEmpty && resends.nextDue == nil)
    }
}
