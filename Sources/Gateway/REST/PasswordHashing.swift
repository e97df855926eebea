import Engine
import HummingbirdBcrypt
import NIOCore
import NIOPosix
import Synchronization

/// New password hashes (bcrypt: user imports, new users, password changes, operator accounts) on threads of
/// their own, apart from the file and DNS work of the shared thread pool (a tenant's password import once held
/// another tenant's media file for 9.7 s there), and shared between tenants in turns (``FairQueue``): one
/// tenant's ten-thousand-row import delays another tenant's new user by one hash per tenant ahead of it. A
/// caller that goes (a dropped import) takes its waiting hashes with it.
final class PasswordHashing: Sendable {
    /// A tenant's queue is full: 503 with `Retry-After`.
    static let overloaded = Problem.retryLater(
        .serviceUnavailable,
        "overloaded",
        "the tenant has too many new passwords waiting to be hashed; try again shortly",
        after: .seconds(5)
    )

    private struct Job: Sendable {
        let password: String
        let continuation: CheckedContinuation<String, any Error>
    }

    private struct State {
        var queue: FairQueue<String, Job>
        var workers = 0
    }

    let cost: UInt8
    let threads: Int
    /// bcrypt (tests hold a hash back with their own).
    private let hashFunction: @Sendable (String, UInt8) -> String
    private let pool: NIOThreadPool
    private let state: Mutex<State>

    init(
        cost: UInt8,
        threads: Int = max(1, System.coreCount - 1),
        capacityPerTenant: Int = 1_000,
        hash: @escaping @Sendable (String, UInt8) -> String = { Bcrypt.hash($0, cost: $1) }
    ) {
        self.cost = cost
        self.hashFunction = hash
        self.threads = max(1, threads)
        state = Mutex(State(queue: FairQueue(capacityPerKey: capacityPerTenant)))
        pool = NIOThreadPool(numberOfThreads: self.threads)
        pool.start()
    }

    deinit {
        pool.shutdownGracefully { _ in }
    }

    /// Jobs waiting, all tenants together (for tests and inspection).
    var waiting: Int { state.withLock { $0.queue.count } }

    /// The bcrypt hash of `password`, in `tenant`'s turn (nil: an operator account's). Throws ``overloaded`` (503) when
    /// the tenant has `capacityPerTenant` hashes waiting, and `CancellationError` when the caller is cancelled
    /// before its hash started.
    func hash(_ password: String, tenant: TenantID?) async throws -> String {
        let key = tenant?.rawValue ?? ""
        let ticket = Mutex<(id: UInt64?, cancelled: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
                enum Admission {
                    case refused(any Error)
                    case queued(startWorker: Bool)
                }
                let admission = state.withLock { state -> Admission in
                    guard !ticket.withLock({ $0.cancelled }) else { return .refused(CancellationError()) }
                    guard let id = state.queue.enqueue(Job(password: password, continuation: continuation), key: key)
                    else { return .refused(Self.overloaded) }
                    ticket.withLock { $0.id = id }
                    guard state.workers < threads else { return .queued(startWorker: false) }
                    state.workers += 1
                    return .queued(startWorker: true)
                }
                switch admission {
                case .refused(let error): continuation.resume(throwing: error)
                case .queued(startWorker: true): pool.submit { _ in self.work() }
                case .queued(startWorker: false): break
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Job? in
                let id = ticket.withLock { ticket -> UInt64? in
                    ticket.cancelled = true
                    return ticket.id
                }
                return id.flatMap { state.queue.remove($0, key: key) }
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// One worker thread: hashes jobs in the tenants' turns until none waits.
    private func work() {
        while true {
            let job = state.withLock { state -> Job? in
                guard let job = state.queue.next() else {
                    state.workers -= 1
                    return nil
                }
                return job
            }
            guard let job else { return }
            job.continuation.resume(returning: hashFunction(job.password, cost))
        }
    }
}
