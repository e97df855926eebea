import Synchronization

/// A server-side deadline on a request's work (the store's reads and writes above all): when it passes, the
/// client gets 503 with `Retry-After` instead of waiting for a store that has stalled (a frozen file system, a
/// lock held elsewhere).
///
/// A store call cannot be interrupted, so the work goes on in its own task and its result is dropped: a
/// transaction commits whole or not at all, and every write a route makes is idempotent except a new reminder
/// (a client that retries after the 503 may then hold two). Abandoned work still holds its place in the
/// server's bounds (streams, connections) until it ends.
struct RequestDeadline: Sendable {
    let limit: Duration

    struct Exceeded: Error {}

    /// Runs `work`, throwing ``Exceeded`` when it has not finished within the limit. Cancelling the caller
    /// cancels the work.
    func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let race = Race<T>()
        let worker = Task {
            let result: Result<T, any Error>
            do { result = .success(try await work()) } catch { result = .failure(error) }
            race.finish(result)
        }
        let timer = Task {
            do { try await Task.sleep(for: limit) } catch { return }
            race.finish(.failure(Exceeded()))
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { race.wait($0) }
        } onCancel: {
            worker.cancel()
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

    func finish(_ result: Result<T, any Error>) {
        let waiting: CheckedContinuation<T, any Error>? = state.withLock { state in
            guard case .none = state.result else { return nil }
            state.result = result
            let continuation = state.continuation
            state.continuation = nil
            return continuation
        }
        waiting?.resume(with: result)
    }
}
