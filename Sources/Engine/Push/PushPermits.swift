import DequeModule
import Synchronization

/// The places of pushes awaiting APNs' answer, taken a batch at a time and given back one by one as answers come.
///
/// A batch waits until its places are free (a batch larger than every place waits until all are free, and then
/// goes alone). Waiters are served in order; `close` turns every waiter away.
final class PushPermits: Sendable {
    private struct State {
        var available: Int
        var waiting: Deque<(count: Int, continuation: CheckedContinuation<Bool, Never>)> = []
        var closed = false
    }

    let total: Int
    private let state: Mutex<State>

    init(_ total: Int) {
        self.total = max(1, total)
        state = Mutex(State(available: self.total))
    }

    /// Takes `count` places, waiting until they are free; false once closed (nothing taken).
    func acquire(_ count: Int) async -> Bool {
        await withCheckedContinuation { continuation in
            let granted: Bool? = state.withLock { state in
                if state.closed { return false }
                guard state.waiting.isEmpty, state.available >= min(count, total) else {
                    state.waiting.append((count, continuation))
                    return nil
                }
                state.available -= count
                return true
            }
            if let granted { continuation.resume(returning: granted) }
        }
    }

    /// Gives `count` places back and lets in the waiters they make room for.
    func release(_ count: Int) {
        guard count > 0 else { return }
        let admitted: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            state.available += count
            var admitted: [CheckedContinuation<Bool, Never>] = []
            while let first = state.waiting.first, state.available >= min(first.count, total) {
                state.available -= first.count
                admitted.append(first.continuation)
                state.waiting.removeFirst()
            }
            return admitted
        }
        for waiter in admitted { waiter.resume(returning: true) }
    }

    /// Turns every waiter, and every later caller, away.
    func close() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting.map(\.continuation)
        }
        for waiter in waiting { waiter.resume(returning: false) }
    }

    /// Places taken (pushes awaiting their answer).
    var inUse: Int { state.withLock { max(0, total - $0.available) } }
}

/// Places held by a batch of requests, each given back exactly once: by its answer as it comes, or with the rest
/// when the batch returns (requests that never got an answer of their own).
public final class HeldPlaces: Sendable {
    private let count: Atomic<Int>

    public init(_ count: Int) { self.count = Atomic(count) }

    /// Takes `n`; returns how many of them were still held.
    public func take(_ n: Int) -> Int {
        let before = count.subtract(n, ordering: .relaxed).oldValue
        return max(0, min(n, before))
    }

    /// Takes whatever is still held.
    public func takeAll() -> Int { max(0, count.exchange(0, ordering: .relaxed)) }
}
