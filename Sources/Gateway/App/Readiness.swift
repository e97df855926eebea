import Engine
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// Whether this node should be sent traffic (`GET /health` on both listeners): its store takes a write within
/// `deadline`, and it is not stopping. APNs trouble does not make a node unready: its REST API still serves, and
/// taking it out of a load balancer would not bring APNs back (metrics and alerts report that). One probe runs
/// at a time, and its answer serves every caller for `reuse`.
final class Readiness: Sendable {
    let store: any ChangeFeedStore
    let deadline: Duration
    let reuse: Duration
    private let state = Mutex<State>(State())

    private struct State {
        var checked: (at: ContinuousClock.Instant, problem: String?)?
        var running: Task<String?, Never>?
        var stopping = false
    }

    init(store: any ChangeFeedStore, deadline: Duration = .seconds(2), reuse: Duration = .seconds(1)) {
        self.store = store
        self.deadline = deadline
        self.reuse = reuse
    }

    /// From now on the node answers not ready (a graceful stop has begun: new traffic should go elsewhere).
    func stopping() { state.withLock { $0.stopping = true } }

    /// Nil when ready; else why not.
    func problem() async -> String? {
        let task: Task<String?, Never> = state.withLock { state in
            if state.stopping { return Task { "stopping" } }
            if let checked = state.checked, checked.at.duration(to: .now) < reuse { return Task { checked.problem } }
            if let running = state.running { return running }
            let task = Task { await self.probe() }
            state.running = task
            return task
        }
        return await task.value
    }

    private func probe() async -> String? {
        let store = self.store
        let deadline = self.deadline
        // The store's call runs on its own: a write queued behind a stuck one cannot be cancelled, and the answer
        // must not wait for it.
        let problem: String? = await withCheckedContinuation { continuation in
            let answer = FirstAnswer(continuation)
            Task {
                var problem: String?
                do { try await store.probeWrite() } catch { problem = "the store cannot take a write: \(error)" }
                answer.resume(problem)
            }
            Task {
                try? await Task.sleep(for: deadline)
                answer.resume("the store did not take a write within \(deadline.components.seconds) s")
            }
        }
        state.withLock { state in
            state.checked = (.now, problem)
            state.running = nil
        }
        return problem
    }

    /// `GET /health`'s answer: 200 when ready, 503 (problem+json, `Retry-After`) when not.
    func response(_ request: Request, context: some RequestContext) async throws -> Response {
        guard let problem = await problem() else { return Self.live() }
        return try Problem.retryLater(.serviceUnavailable, "not-ready", problem, after: .seconds(5))
            .response(from: request, context: context)
    }

    /// `GET /health/live`: the process answers (for a liveness probe: a store outage is no reason to restart).
    static func live() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: .init(string: #"{"status":"ok"}"#))
        )
    }
}

/// A continuation resumed by whichever answer comes first; later ones are dropped.
private final class FirstAnswer: Sendable {
    private let continuation: Mutex<CheckedContinuation<String?, Never>?>

    init(_ continuation: CheckedContinuation<String?, Never>) { self.continuation = Mutex(continuation) }

    func resume(_ problem: String?) { continuation.withLock { $0.take() }?.resume(returning: problem) }
}
