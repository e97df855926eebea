import Foundation
import Logging

/// The slow path of a push: the answers that are neither accepted nor a final verdict go round the outcome policy
/// one by one (retries with backoff, a renewed provider token, a paused tenant).
extension PushGateway {
    nonisolated func metadata(_ push: OutboundPush, reason: String? = nil) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "tenant.id": "\(push.tenant)", "delivery.id": "\(push.delivery)", "device.token": "\(push.device.token)",
        ]
        if let reason { metadata["push.reason"] = "\(reason)" }
        return metadata
    }

    /// How one device's push ended.
    enum DeviceOutcome {
        case accepted(apnsID: String)
        case finished
        /// Transient failures outlasted the retries: the delivery stays unsettled for a later attempt.
        case deferred
        case tenantStopped
    }

    /// Goes on from the first answer (already counted in the metrics) until the policy says stop.
    nonisolated func send(
        _ push: OutboundPush,
        tenant: Tenant,
        delivery: Delivery,
        first: PushResult
    ) async throws -> DeviceOutcome {
        var attempt = 0
        var next: PushResult? = first
        while true {
            attempt += 1
            let result: PushResult
            if let given = next {
                result = given
                next = nil
            } else {
                let started = ContinuousClock.now
                result = await transport.send(push)
                metrics.push(
                    tenant: tenant.id,
                    channel: push.device.channel,
                    result: result,
                    duration: started.duration(to: .now)
                )
                health.withLock { $0.observe(result, at: Date()) }
                if let kind = result.refusalKind { await noteRefusals(tenant.id, [kind: 1]) }
            }
            let action = configuration.policy.action(for: result, attempt: attempt, jitter: Double.random(in: 0...1))
            var reason: String?
            if let refusal = result.refusal {
                reason = refusal.reason
                await count { $0.rejected["\(refusal.status) \(refusal.reason)", default: 0] += 1 }
            }
            if case .transportFailure = result { await count { $0.transportFailures += 1 } }
            switch action {
            case .delivered:
                await count { $0.accepted += 1 }
                if case .accepted(let apnsID) = result { return .accepted(apnsID: apnsID) }
                return .finished
            case .retry(let backoff, _):
                // Stopping: no new attempt; the delivery stays unsettled for the next start.
                if await isStopping { return .deferred }
                await count { $0.retried += 1 }
                try await clock.sleep(for: backoff)
            case .renewProviderTokenAndRetry:
                await transport.renewCredentials(tenant: tenant.id)
            case .drop(let alert):
                if alert { logger.warning("push dropped", metadata: metadata(push, reason: reason)) }
                return .finished
            case .deferred:
                await count { $0.deferred += 1 }
                logger.warning(
                    "push deferred: the channel kept failing; it is tried again later",
                    metadata: metadata(push, reason: reason)
                )
                return .deferred
            case .quarantineToken, .removeTokenForTopic, .removeTokenIfRegisteredBefore:
                if let verdict = action.verdict(on: push.device.token) {
                    let changed = try await registry.apply(tenant: tenant, [verdict]).first ?? false
                    await count { $0.count(verdict, changed: changed) }
                }
                return .finished
            case .stopTenant(let reason):
                // Another channel's credential is its transport's to mark failed (it refuses the tenant's pushes
                // on that channel until new credentials come); the tenant's APNs pushes go on.
                guard push.device.channel == .apns else {
                    logger.error(
                        "the channel refused the tenant's credential; its pushes on it are dropped until new credentials come",
                        metadata: metadata(push, reason: reason).merging(["push.channel": "\(push.device.channel)"]) {
                            $1
                        }
                    )
                    return .finished
                }
                await pause(tenant.id, reason: reason, requeue: delivery)
                return .tenantStopped
            }
        }
    }
}
