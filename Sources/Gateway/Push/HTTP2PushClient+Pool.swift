import Engine
import Foundation
import NIOCore
import Synchronization

/// The pool: leasing streams, opening connections on the reconnect schedule, noticing losses, retiring
/// connections, and logging when the service becomes unreachable and reachable again.
extension HTTP2PushClient {
    func limit(_ entry: Pooled) -> Int {
        if authentication.provesByToken, !entry.verified { return 1 }
        return Int(max(1, entry.link.maxStreams.load(ordering: .relaxed)))
    }

    /// A connection with a free stream, opening one or waiting as needed. While the service cannot be reached the
    /// caller waits for the pool's next attempts (one probe at a time, `ReconnectSchedule`), up to
    /// `unreachableWait`; then it fails and the caller's retry policy takes over.
    func acquire(
        upTo wanted: Int,
        giveUpAt: ContinuousClock.Instant
    ) async -> Result<(link: Link, granted: Int), AcquireFailure> {
        // Whether `streamWanted` was raised since the last look: then one more look, and only then a wait.
        var announced = false
        while !Task.isCancelled {
            // APNs answered 503, or FCM asked for a pause: nothing is sent before it ends.
            if let pausedUntil = schedule.paused(now: .now) {
                guard pausedUntil <= giveUpAt else {
                    return .failure(AcquireFailure("\(dialect.name) asked for a pause; the pool keeps trying"))
                }
                do {
                    try await Task.sleep(until: pausedUntil, clock: .continuous)
                } catch {
                    return .failure(AcquireFailure("cancelled"))
                }
                continue
            }
            // Only this actor adds to `leased`; answers only take away, so a stream seen free stays free.
            if let (id, entry) = pool.first(where: { $0.value.link.isOpen && free($0.value) > 0 }) {
                let granted = min(wanted, free(entry))
                entry.link.leased.add(granted, ordering: .sequentiallyConsistent)
                pool[id]?.lastUsed = .now
                return .success((entry.link, granted))
            }
            prune()
            let open = pool.values.filter { $0.link.isOpen }.count
            let now = ContinuousClock.now
            let maximum = configuration.maximumConnections
            if schedule.mayConnect(now: now, open: open, connecting: connecting, maximum: maximum) {
                await connect()
                continue
            }
            if open == 0 {
                guard now < giveUpAt, schedule.nextAttemptAt <= giveUpAt || connecting > 0 else {
                    return .failure(AcquireFailure("\(dialect.name) is unreachable; the pool keeps trying"))
                }
                if connecting == 0 {
                    // Backing off: the next attempt is this caller's.
                    do {
                        try await Task.sleep(until: schedule.nextAttemptAt, clock: .continuous)
                    } catch {
                        return .failure(AcquireFailure("cancelled"))
                    }
                    continue
                }
                // Another caller's probe is running: wait for its outcome below.
            }
            guard waiters.count < configuration.maximumWaiting else {
                return .failure(AcquireFailure("too many pushes waiting for a \(dialect.name) stream"))
            }
            // Raised before the last look: an answer after that look sees it and wakes the waiters.
            if !announced {
                streamWanted.store(true, ordering: .sequentiallyConsistent)
                announced = true
                continue
            }
            announced = false
            // Woken by an answer, a verified, opened or lost connection, a failed connect, or the caller's
            // cancellation (then all wake and re-check).
            await withTaskCancellationHandler {
                await withCheckedContinuation { waiters.append($0) }
            } onCancel: {
                Task { await self.wakeWaiters() }
            }
        }
        return .failure(AcquireFailure("cancelled"))
    }

    struct AcquireFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Forgets connections that can take no more work and hold no stream, closing those still open (retired).
    func prune() {
        for (id, entry) in pool where !entry.link.isOpen && entry.link.leased.load(ordering: .relaxed) == 0 {
            pool[id] = nil
            if entry.link.connection.channel.isActive {
                // Retired by this pool: its close is not a loss.
                entry.link.lost.store(true, ordering: .relaxed)
                entry.link.connection.channel.close(promise: nil)
            }
        }
    }

    /// A connection got GOAWAY or closed (reported by its event loop as it happened).
    func lost(_ link: Link) {
        let id = ObjectIdentifier(link)
        let carriedPushes = pool[id]?.carriedPushes ?? true
        if link.leased.load(ordering: .relaxed) == 0 {
            // After a GOAWAY with nothing in flight the connection has no use left (with streams in flight,
            // `prune` closes it once they are answered).
            pool[id] = nil
            if link.connection.channel.isActive { link.connection.channel.close(promise: nil) }
        }
        log(
            schedule.connectionLost(
                round: link.round,
                carriedPushes: carriedPushes,
                now: .now,
                jitter: Double.random(in: 0.5...1.5)
            )
        )
        // Callers waiting for a stream look again (and may open a new connection).
        wakeWaiters()
    }

    func free(_ entry: Pooled) -> Int {
        limit(entry) - entry.link.leased.load(ordering: .sequentiallyConsistent)
    }

    /// Gives streams back (on the event loop as answers come, or after a chunk); wakes the waiters when a caller
    /// announced it waits.
    nonisolated func giveBack(_ link: Link, streams: Int) {
        link.leased.subtract(streams, ordering: .sequentiallyConsistent)
        if streamWanted.exchange(false, ordering: .sequentiallyConsistent) {
            Task { await self.wakeWaiters() }
        }
    }

    /// After a chunk's answers: an accepted push verifies its connection and ends an outage; a stream that
    /// timed out, or an answer whose retry needs a new connection, retires the connection from new work.
    func settle(_ link: Link, answers: [HTTP2Answer]) {
        var accepted = false
        var retire = false
        for answer in answers {
            switch answer.result {
            case .success(let response) where response.status == 200: accepted = true
            // A dead token's 410 never asks for a new connection: its body is not parsed here (it is once more
            // when the batch is collected).
            case .success(let response) where response.status == 410: break
            case .success(let response): retire = retire || retires(dialect.result(response))
            case .failure(let error): retire = retire || error.code == .deadlineExceeded
            }
        }
        settle(link, accepted: accepted, retire: retire)
    }

    func settle(_ link: Link, accepted: Bool, retire: Bool) {
        let id = ObjectIdentifier(link)
        if retire, !link.draining.exchange(true, ordering: .relaxed) {
            logger.info(
                "\(dialect.name) connection retired: a stream timed out or \(dialect.name) asked for a new connection",
                metadata: ["push.host": "\(configuration.host)"]
            )
        }
        guard accepted else { return }
        let wasVerified = pool[id]?.verified ?? true
        pool[id]?.verified = true
        pool[id]?.carriedPushes = true
        log(schedule.accepted(now: .now))
        if !wasVerified { wakeWaiters() }
    }

    /// APNs answered 503 to a push sent in `round`: counted once per round; sending pauses until the next attempt.
    func unavailable(round: Int, reason: String) {
        log(schedule.unavailable(round: round, reason: reason, now: .now, jitter: Double.random(in: 0.5...1.5)))
    }

    /// The service asked every sender to pause (FCM's `Retry-After`): nothing goes out before `pause` ends.
    func hold(for pause: Duration) {
        schedule.hold(until: .now + pause)
    }

    /// Whether an answer asks for the retry to go over another connection (the outcome policy's `newConnection`).
    func retires(_ result: PushResult) -> Bool {
        guard result.refusal != nil else { return false }
        if case .retry(_, newConnection: true) = policy.action(for: result, attempt: 1) { return true }
        return false
    }

    func wakeWaiters() {
        let woken = waiters
        waiters.removeAll()
        for waiter in woken { waiter.resume() }
    }

    /// Logs the pool becoming unreachable and reachable again, once each.
    func log(_ transition: FailureStreak.Transition?) {
        switch transition {
        case .startedFailing(let error):
            logger.error(
                "\(dialect.name) unreachable; pushes wait for the pool's next connection attempt",
                metadata: ["push.host": "\(configuration.host)", "error": "\(error)"]
            )
        case .recovered(let failures, let duration):
            logger.notice(
                "\(dialect.name) reachable again",
                metadata: [
                    "push.host": "\(configuration.host)", "failures": "\(failures)",
                    "unreachable_ms": "\(Int(duration / .milliseconds(1)))",
                ]
            )
        case nil:
            break
        }
    }

    /// Opens one connection; a failure is counted by the reconnect schedule (once per attempt round).
    func connect() async {
        connecting += 1
        let round = schedule.round
        defer {
            connecting -= 1
            // Callers waiting for this connection (or for the probe's outcome) look again.
            wakeWaiters()
        }
        do {
            let box = Mutex<Link?>(nil)
            let connection = try await HTTP2ClientConnection.connect(
                host: configuration.host,
                port: configuration.port,
                tls: configuration.tls,
                serverHostname: configuration.serverHostname ?? configuration.host,
                connectTimeout: TimeAmount(configuration.connectTimeout)
            ) { [weak self] event in
                guard let link = box.withLock({ $0 }) else { return }
                switch event {
                case .remoteSettings(let streams): link.maxStreams.store(streams, ordering: .relaxed)
                case .goAway, .connectionClosed:
                    link.draining.store(true, ordering: .relaxed)
                    if !link.lost.exchange(true, ordering: .relaxed) {
                        self?.losses.add(1, ordering: .relaxed)
                        Task { await self?.lost(link) }
                    }
                default: break
                }
            }
            let link = Link(connection: connection, round: round)
            box.withLock { $0 = link }
            let (streams, _, usable) = try await connection.streamState()
            link.maxStreams.store(streams, ordering: .relaxed)
            if !usable { link.draining.store(true, ordering: .relaxed) }
            pool[ObjectIdentifier(link)] = Pooled(link: link, verified: !authentication.provesByToken)
            stats.connectionsOpened += 1
            logger.debug(
                "\(dialect.name) connection opened",
                metadata: ["push.host": "\(configuration.host)", "push.streams": "\(streams)"]
            )
        } catch {
            if Task.isCancelled { return }
            log(
                schedule.attemptFailed(
                    round: round,
                    error: "\(error)",
                    now: .now,
                    jitter: Double.random(in: 0.5...1.5)
                )
            )
            logger.debug(
                "cannot connect to \(dialect.name)",
                metadata: [
                    "push.host": "\(configuration.host)", "error": "\(error)",
                    "push.next_attempt_ms":
                        "\(Int(ContinuousClock.now.duration(to: schedule.nextAttemptAt) / .milliseconds(1)))",
                ]
            )
        }
    }
}
