import NIOCore
import Synchronization

/// A server-side deadline on a request's work (the store's reads and writes above all): when it passes, the
/// client gets 503 with `Retry-After` instead of waiting for a store that has stalled (a frozen file system, a
/// lock held elsewhere).
///
/// A store call cannot be interrupted, so the work goes on in its own task and its result is dropped: a
/// transaction commits whole or not at all, and every write a route makes is idempotent except a new reminder
/// (a client that retries after the 503 may then hold two). Abandoned work keeps its place in admission control
/// (`AdmissionControl`) until it ends, so a stalled store fills the node's bound and further requests are
/// refused at once instead of piling up.
struct RequestDeadline: Sendable {
    let limit: Duration

    struct Exceeded: Error {}

    /// Runs `work`, throwing ``Exceeded`` when it has not finished within the limit. Cancelling the caller
    /// cancels the work. When the deadline wins, `abandoned` runs then and `finishedLate` when the work ends (so
    /// the work can keep its place in the server's bounds).
    ///
    /// The work runs on `executor` when given (the connection's event loop, where HTTP/2 requests run: no thread
    /// hop), the timer on `eventLoop`.
    ///
    /// With `gate` (a streamed body the work reads as it arrives), the deadline cancels the work and this waits
    /// until the work's read of the body has returned: nothing reads a body the server has answered for.
    func run<T: Sendable>(
        on eventLoop: any EventLoop,
        executor: (any TaskExecutor)?,
        gate: BodyGate? = nil,
        abandoned: @escaping @Sendable () -> Void = {},
        finishedLate: @escaping @Sendable () -> Void = {},
        _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let race = Race<T>()
        let worker = Task(executorPreference: executor) {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            race.finish(result, ifLate: finishedLate)
        }
        let timer = eventLoop.scheduleTask(in: .nanoseconds(Int64(limit / .nanoseconds(1)))) {
            race.finish(.failure(Exceeded()), ifFirst: abandoned)
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { race.wait($0) }
            } onCancel: {
                worker.cancel()
            }
        } catch {
            if let gate {
                worker.cancel()
                await gate.close()
            }
            throw error
        }
    }
}

/// The first of the work's result and the timer's expiry wins; the other is dropped.
private final class Race<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T, any Error>?, result: Result<T, any Error>?)>(
        (nil, nil)
    )

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let ready: Result<T, any Error>? = state.withLock {
            if let result = $0.result { return result }
            $0.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }

    /// Records a result unless another came first; `ifFirst` or `ifLate` runs under the lock, so the timer's
    /// `abandoned` always runs before the work's `finishedLate`.
    func finish(
        _ result: Result<T, any Error>,
        ifFirst: () -> Void = {},
        ifLate: () -> Void = {}
    ) {
        let waiting: CheckedContinuation<T, any Error>? = state.withLock { state in
            guard case .none = state.result else {
                ifLate()
                return nil
            }
            state.result = result
            ifFirst()
            let continuation = state.continuation
            state.continuation = nil
            return continuation
        }
        waiting?.resume(with: result)
    }
}
