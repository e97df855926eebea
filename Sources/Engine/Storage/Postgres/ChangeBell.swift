import Synchronization

/// Wakes the change feed's follower when another node announces a change (`NOTIFY`): a ring while nobody waits is
/// kept for the next wait, so none is lost between two waits.
final class ChangeBell: Sendable {
    private struct State {
        var pending = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    func ring() {
        let waiters = state.withLock { state in
            if state.waiters.isEmpty { state.pending = true }
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns at the next ring (at once if one came since the last wait) or when `timeout` has passed.
    func wait(upTo timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: timeout) }
            group.addTask { await self.nextRing() }
            await group.next()
            group.cancelAll()
        }
    }

    private func nextRing() async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    // Cancelled before the continuation was kept: the handler below found nothing to resume.
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
