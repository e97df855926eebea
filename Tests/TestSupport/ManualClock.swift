import Engine
import Foundation
import Synchronization

/// An `EngineClock` that moves only when a test advances it: the code under test sleeps on it, and the test sees
/// each pause it asked for (`requested`) and how many are waiting (`sleepers`), then lets them pass with `advance`.
public final class ManualClock: EngineClock {
    private struct Sleeper {
        var deadline: Date
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Date
        var sleepers: [UInt64: Sleeper] = [:]
        var cancelled: Set<UInt64> = []
        var requested: [Duration] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    public init(now: Date = Date()) {
        state = Mutex(State(now: now))
    }

    public var now: Date { state.withLock { $0.now } }

    /// Every pause asked for so far, in order.
    public var requested: [Duration] { state.withLock { $0.requested } }

    /// Pauses waiting for the clock to move.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The time until the earliest waiting pause ends (nil: none waits).
    public var untilNextWake: Duration? {
        state.withLock { state in
            state.sleepers.values.map(\.deadline).min().map { .seconds($0.timeIntervalSince(state.now)) }
        }
    }

    public func sleep(for duration: Duration) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            state.requested.append(duration)
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if duration <= .zero { return .success(()) }
                    let deadline = state.now.addingTimeInterval(
                        Double(duration.components.seconds)
                            + Double(duration.components.attoseconds) / 1e18
                    )
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let sleeper = state.withLock { state in
                guard let sleeper = state.sleepers.removeValue(forKey: id) else {
                    state.cancelled.insert(id)
                    return nil as Sleeper?
                }
                return sleeper
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on and wakes every pause that has ended by then.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state in
            state.now = state.now.addingTimeInterval(
                Double(duration.components.seconds)
                    + Double(duration.components.attoseconds) / 1e18
            )
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }
}
