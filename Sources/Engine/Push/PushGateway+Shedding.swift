import Foundation

/// A node that cannot push gives its work to nodes that can: the scheduler asks the gateway to shed, hands its
/// leases and claims back through the store, and later lets it take work again.
extension PushGateway {
    /// What the node's dispatch should do now, from the answers so far (``PushHealth``).
    public nonisolated func pushMode(at now: Date) -> PushHealth.Mode {
        health.withLock { $0.mode(at: now) }
    }

    /// Whether pushes are failing, since when, and whether the node has given up (for inspection).
    public nonisolated var currentPushHealth: PushHealth { health.withLock { $0 } }

    /// Starts shedding: drops every queued push (their deliveries stay unsettled in the ledger, for whichever
    /// node leases them next), wakes producers waiting for room (their enqueue returns false), and takes no more
    /// until ``resumeTaking()``. Pushes in flight finish. Returns how many queued pushes were dropped.
    @discardableResult
    public func shed() -> Int {
        shedding = true
        let dropped = queues.dropAll() + deferredPushes.dropAll()
        for waiters in blockedProducers.values { for waiter in waiters { waiter.continuation.resume() } }
        blockedProducers.removeAll()
        return dropped
    }

    /// Whether a probe's pushes have all had their answers: nothing in flight, nothing queued for a tenant that is
    /// not paused (a paused tenant's queue waits for an operator, not for APNs).
    public var probeAnswered: Bool {
        permits.inUse == 0 && queues.onlyPausedWait
    }

    /// Takes pushes again after shedding.
    public func resumeTaking() {
        shedding = false
    }
}
