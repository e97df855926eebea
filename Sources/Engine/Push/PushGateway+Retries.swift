import Foundation
import Logging

/// The one resend loop of a batch: every answer, the first and each resend's, goes round the outcome policy
/// (`judge`); the pushes it sends again wait on the gateway's clock (`PushResends`), and those due go out together.
extension PushGateway {
    nonisolated func metadata(_ push: OutboundPush, reason: String? = nil) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "tenant.id": "\(push.tenant)", "delivery.id": "\(push.delivery)", "device.token": "\(push.device.token)",
        ]
        if let reason { metadata["push.reason"] = "\(reason)" }
        return metadata
    }

    /// Settles a batch from its first answers: each round of answers goes through the policy (`judge`), and the
    /// resends it asks for wait on the clock and go out together as they fall due, until none waits. A graceful stop
    /// (or cancellation) ends the wait at once: the pushes still waiting leave their deliveries unsettled, pushed
    /// again by a later sweep or start.
    nonisolated func settle(
        _ first: [PushAnswer],
        sends: [(job: Int, push: OutboundPush)],
        jobs: [Job],
        tenant: Tenant,
        counts: inout PushStatistics
    ) async throws -> BatchTally {
        var tally = BatchTally(jobs: jobs.count, pushes: sends.count)
        var resends = PushResends()
        var answers = first
        var positions = Array(sends.indices)
        var attempts = [Int](repeating: 1, count: sends.count)
        while true {
            try await judge(
                answers,
                at: positions,
                attempts: attempts,
                sends: sends,
                jobs: jobs,
                tenant: tenant,
                tally: &tally,
                counts: &counts,
                resends: &resends
            )
            guard let due = resends.nextDue,
                await waitForResends(.seconds(due.timeIntervalSince(clock.now)))
            else { break }
            let round = resends.takeDue(at: clock.now)
            (positions, attempts, answers) = (round.map(\.position), round.map(\.attempt), [])
            if round.isEmpty { continue }
            guard await permits.acquire(round.count) else {
                for item in round { tally.unsettled.insert(sends[item.position].job) }
                break
            }
            let held = HeldPlaces(round.count)
            let permits = self.permits
            answers = await transport.send(batch: round.map { sends[$0.position].push }) { _, _ in
                permits.release(held.take(1))
            }
            permits.release(held.takeAll())
        }
        for item in resends.takeAll() { tally.unsettled.insert(sends[item.position].job) }
        return tally
    }

    /// One round of a batch's answers through the outcome policy: accepted pushes and final refusals are settled,
    /// verdicts on devices applied in one transaction, a paused tenant's delivery put back in its queue, and the
    /// pushes to send again scheduled on `resends` (after renewing the tenant's credential when it expired).
    nonisolated func judge(
        _ answers: [PushAnswer],
        at positions: [Int],
        attempts: [Int],
        sends: [(job: Int, push: OutboundPush)],
        jobs: [Job],
        tenant: Tenant,
        tally: inout BatchTally,
        counts: inout PushStatistics,
        resends: inout PushResends
    ) async throws {
        metrics.pushes(tenant: tenant.id, answers, channels: positions.map { sends[$0].push.device.channel })
        let answered = Date()
        health.withLock { health in for answer in answers { health.observe(answer.result, at: answered) } }
        var refused: [String: Int] = [:]
        for answer in answers {
            if let kind = answer.result.refusalKind { refused[kind, default: 0] += 1 }
        }
        if !refused.isEmpty { await noteRefusals(tenant.id, refused) }
        var verdicts: [TokenVerdict] = []
        var renew: Set<PushChannel> = []
        let now = clock.now
        // By position: iterating `sends` copied each push, and with it its strings.
        for offset in positions.indices {
            let position = positions[offset]
            let result = answers[offset].result
            let job = sends[position].job
            let channel = sends[position].push.device.channel
            // The jitter only spreads retries: an accepted push does not draw a random number (a system call).
            let jitter: Double
            if case .accepted = result { jitter = 0 } else { jitter = Double.random(in: 0...1) }
            let action = configuration.policy.action(for: result, attempt: attempts[offset], jitter: jitter)
            let refusal = result.refusal
            if let refusal { counts.rejected["\(refusal.status) \(refusal.reason)", default: 0] += 1 }
            if case .transportFailure = result { counts.transportFailures += 1 }
            switch action {
            case .delivered:
                counts.accepted += 1
                tally.done[position] = true
                if case .accepted(let apnsID) = result {
                    tally.accepted[job] = tally.accepted[job] ?? apnsID
                    tally.channels[job].insert(PushChannels(channel))
                }
            case .retry(let backoff, _):
                counts.retried += 1
                resends.schedule(position, attempt: attempts[offset] + 1, after: backoff, from: now)
            case .renewProviderTokenAndRetry:
                renew.insert(channel)
                resends.schedule(position, attempt: attempts[offset] + 1, after: .zero, from: now)
            case .drop(let alert):
                tally.done[position] = true
                if alert {
                    logger.warning("push dropped", metadata: metadata(sends[position].push, reason: refusal?.reason))
                }
            case .deferred:
                counts.deferred += 1
                tally.unsettled.insert(job)
                tally.deferred.insert(job)
                logger.warning(
                    "push deferred: the channel kept failing; it is tried again later",
                    metadata: metadata(sends[position].push, reason: refusal?.reason)
                )
            case .quarantineToken, .removeTokenForTopic, .removeTokenIfRegisteredBefore:
                tally.done[position] = true
                // Dead devices: one transaction for the round's verdicts, not one each.
                if let verdict = action.verdict(on: sends[position].push.device.token) { verdicts.append(verdict) }
            case .stopTenant(let reason):
                // Another channel's credential is its transport's to mark failed (it refuses the tenant's pushes
                // on that channel until new credentials come); the tenant's APNs pushes go on.
                guard channel == .apns else {
                    // Refused for good until new credentials come: this device's outcome.
                    tally.done[position] = true
                    logger.error(
                        "the channel refused the tenant's credential; its pushes on it are dropped until new credentials come",
                        metadata: metadata(sends[position].push, reason: reason).merging(["push.channel": "\(channel)"])
                        {
                            $1
                        }
                    )
                    continue
                }
                // Back in the paused tenant's queue: pushed again when an operator's change resumes the tenant, to
                // the devices not done by then (read again then: this batch may record some).
                var requeued = jobs[job].delivery
                requeued.pushedDevices = nil
                await pause(tenant.id, reason: reason, requeue: requeued)
                tally.unsettled.insert(job)
            }
        }
        if !verdicts.isEmpty {
            let changed = try await registry.apply(tenant: tenant, verdicts)
            for (verdict, changed) in zip(verdicts, changed) { counts.count(verdict, changed: changed) }
        }
        for channel in renew { await transport.renewCredentials(tenant: tenant.id, channel: channel) }
    }

    /// Waits `delay` on the clock for a batch's next resends; false when the gateway stops or the task is cancelled
    /// first (a graceful stop does not wait out a backoff).
    func waitForResends(_ delay: Duration) async -> Bool {
        guard !isStopping, !Task.isCancelled else { return false }
        let id = nextResendWait()
        let clock = self.clock
        let timer = Task {
            let slept = (try? await clock.sleep(for: delay)) != nil
            await self.endResendWait(id, due: slept)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { resendWaits[id] = (timer, $0) }
        } onCancel: {
            timer.cancel()
        }
    }

    func endResendWait(_ id: UInt64, due: Bool) {
        resendWaits.removeValue(forKey: id)?.continuation.resume(returning: due)
    }
}
