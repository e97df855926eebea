import Crypto
import DequeModule
import Foundation
import HummingbirdBcrypt
import NIOCore
import NIOPosix
import Synchronization

/// Runs bcrypt checks on a few threads of its own, from a bounded queue.
///
/// bcrypt is deliberately slow, which makes every unverified credential a lever for a client: this puts a bound on
/// what they can make the server do. The queue holds at most `capacity` checks (a full queue refuses at once, and
/// the caller answers 503); identical checks in flight (same hash, same password) share one run; and a check whose
/// every caller has gone (the client reset its stream) is dropped before it runs.
final class PasswordVerifier: Sendable {
    /// The queue is full: the caller should answer 503 with `retryAfter`.
    struct Overloaded: Error, Sendable {
        var retryAfter: Duration
    }

    private struct Key: Hashable {
        var hash: String
        var digest: Data
    }

    private struct Job {
        var password: String
        var waiters: [Int: CheckedContinuation<Bool, any Error>]
        var started = false
    }

    private struct State {
        var queue = Deque<Key>()
        var jobs: [Key: Job] = [:]
        var workers = 0
        var nextWaiter = 0
        /// Waiters whose continuation is not registered yet, and those of them cancelled meanwhile.
        var unregistered: Set<Int> = []
        var cancelledEarly: Set<Int> = []
        /// Mean time of one check, in seconds (for Retry-After).
        var meanSeconds = 0.25
        /// Checks run so far.
        var runs = 0
    }

    private enum Admission {
        case queued(startWorker: Bool)
        case joined
        case refused(any Error)
    }

    let capacity: Int
    /// Extra places for checks of callers the server already knows (an address a user logged in from).
    let reserve: Int
    let threads: Int
    private let state = Mutex(State())
    private let key = SymmetricKey(size: .bits256)
    private let pool: NIOThreadPool

    init(capacity: Int = 64, reserve: Int = 16, threads: Int = max(1, System.coreCount)) {
        self.capacity = capacity
        self.reserve = reserve
        self.threads = threads
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Checks in flight or queued, and checks run so far (for tests and inspection).
    var pending: Int { state.withLock { $0.jobs.count } }
    var runs: Int { state.withLock { $0.runs } }

    /// Whether `password` matches `hash`. Throws `Overloaded` when the queue is full and `CancellationError` when
    /// the calling task is cancelled before its check ran.
    func verify(_ password: String, hash: String, reserved: Bool = false) async throws -> Bool {
        let key = Key(hash: hash, digest: Data(HMAC<SHA256>.authenticationCode(for: Data(password.utf8), using: key)))
        let id = state.withLock { state in
            defer { state.nextWaiter &+= 1 }
            state.unregistered.insert(state.nextWaiter)
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
                let admission = state.withLock { state -> Admission in
                    state.unregistered.remove(id)
                    if state.cancelledEarly.remove(id) != nil { return .refused(CancellationError()) }
                    if state.jobs[key] != nil {
                        state.jobs[key]?.waiters[id] = continuation
                        return .joined
                    }
                    guard state.queue.count < capacity + (reserved ? reserve : 0) else {
                        let seconds = state.meanSeconds * Double(state.queue.count) / Double(threads)
                        return .refused(Overloaded(retryAfter: .seconds(max(1, Int(seconds.rounded(.up))))))
                    }
                    state.jobs[key] = Job(password: password, waiters: [id: continuation])
                    state.queue.append(key)
                    guard state.workers < threads else { return .queued(startWorker: false) }
                    state.workers += 1
                    return .queued(startWorker: true)
                }
                switch admission {
                case .refused(let error): continuation.resume(throwing: error)
                case .joined, .queued(startWorker: false): break
                case .queued(startWorker: true): pool.submit { _ in self.work() }
                }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Bool, any Error>? in
                guard let waiter = state.jobs[key]?.waiters.removeValue(forKey: id) else {
                    // Not registered yet: it will be refused when it is. Otherwise it has its answer already.
                    if state.unregistered.contains(id) { state.cancelledEarly.insert(id) }
                    return nil
                }
                // Nobody waits for it any more and it has not started: it never runs.
                if let job = state.jobs[key], job.waiters.isEmpty, !job.started {
                    state.jobs[key] = nil
                    state.queue.removeAll { $0 == key }
                }
                return waiter
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// A worker: runs queued checks until the queue is empty.
    private func work() {
        while true {
            let next = state.withLock { state -> (Key, String)? in
                while let key = state.queue.popFirst() {
                    guard let job = state.jobs[key] else { continue }
                    state.jobs[key]?.started = true
                    state.runs += 1
                    return (key, job.password)
                }
                // Decided under the lock: a check queued after this sees fewer workers and starts one.
                state.workers -= 1
                return nil
            }
            guard let (key, password) = next else { return }
            let started = ContinuousClock.now
            let result = Bcrypt.verify(password, hash: key.hash)
            let took = started.duration(to: .now)
            let waiters = state.withLock { state in
                let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18
                state.meanSeconds = state.meanSeconds * 0.9 + seconds * 0.1
                return state.jobs.removeValue(forKey: key)?.waiters.values.map { $0 } ?? []
            }
            for waiter in waiters { waiter.resume(returning: result) }
        }
    }
}
