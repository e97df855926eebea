import Foundation

/// On a store shared by several nodes, a node whose pushes keep failing hands its work to the others
/// (``PushHealth``): it stops taking due rows and deliveries, drops its queue, and ends its claims and leases at
/// once; after holding, it takes a probe's share until a push is accepted.
extension Scheduler {
    /// How much this turn of the loop may take: nil while holding; a probe's share while probing.
    func pushShare() async -> (batch: Int, probing: Bool)? {
        guard let gateway, store.leasesUnsettledDeliveries else { return (configuration.batchSize, false) }
        let mode = gateway.pushMode(at: clock.now)
        defer { lastPushMode = mode }
        switch mode {
        case .handBack:
            await handBack(gateway)
            return nil
        case .holding:
            return nil
        case .probing:
            if lastPushMode != .probing {
                await gateway.resumeTaking()
                logger.notice(
                    "probing whether pushes get through again",
                    metadata: ["share": "\(configuration.probeShare)"]
                )
            }
            // One probe at a time: the next only once the last one's pushes have their answers (a push waiting for
            // an unreachable APNs takes a minute to fail; probing on meanwhile would take a share a second).
            if lastPushMode == .probing, !(await gateway.probeAnswered) { return nil }
            return (configuration.probeShare, true)
        case .pushing:
            if lastPushMode == .probing {
                logger.notice("pushes get through again: dispatching as usual")
            } else if lastPushMode != .pushing {
                await gateway.resumeTaking()
            }
            return (configuration.batchSize, false)
        }
    }

    /// Stops taking work, drops the queue, lets the batches being committed land, and ends this node's claims and
    /// leases so that another node takes them at once.
    private func handBack(_ gateway: PushGateway) async {
        let dropped = await gateway.shed()
        await settlePipeline()
        resetCursor()
        let health = gateway.currentPushHealth
        do {
            let ended = try await store.handBackWork()
            logger.warning(
                "pushes keep failing with none accepted: work handed to the other nodes; taking none, then probing",
                metadata: [
                    "failing_since": "\(health.failingSince.map { "\($0)" } ?? "?")",
                    "queued_dropped": "\(dropped)",
                    "leases_ended": "\(ended?.leases ?? 0)",
                    "claims_ended": "\(ended?.claims ?? 0)",
                    "holding_seconds": "\(Int(health.window.seconds))",
                ]
            )
        } catch {
            // The leases end on their own (leaseTime); the node still takes nothing while holding.
            logger.error("cannot hand back this node's leases", metadata: ["error": "\(error)"])
        }
    }
}
