import Hummingbird
import NIOCore
import Synchronization

/// A streamed request body that the server can take back from the work reading it: once ``close()`` returns,
/// nobody reads the connection's body any more, so the request can be answered (and, over HTTP/1.1, the
/// connection handed back to Hummingbird) while the work itself may still be running. Reads after the close
/// fail with ``Closed``.
///
/// A body has one reader at a time (the underlying sequences trap on a second); a concurrent second read fails
/// instead of reaching them.
final class BodyGate: Sendable {
    struct Closed: Error {}

    private struct State {
        var closed = false
        var reading = false
        /// Whether the body was read to its end.
        var ended = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    private let source: IteratorBox
    /// What an HTTP/1.1 body must come to (its `Content-Length`), and whether its connection is still there:
    /// Hummingbird's body ends the same way when the connection drops as when the body is complete, and a
    /// dropped upload must not pass for a whole one.
    private let statedLength: Int?
    private let connected: (@Sendable () -> Bool)?
    private let received = Atomic<Int>(0)

    init(_ body: RequestBody, statedLength: Int? = nil, connected: (@Sendable () -> Bool)? = nil) {
        source = IteratorBox(body.makeAsyncIterator())
        self.statedLength = statedLength
        self.connected = connected
    }

    /// A body that ended before its stated length, or whose connection went before it was complete.
    static let incomplete = Problem(.badRequest, "body-incomplete", "the request body ended before it was complete")

    /// The body to hand to the work.
    var body: RequestBody { RequestBody(asyncSequence: Sequence(gate: self)) }

    /// Whether the body was read to its end before the gate closed.
    var ended: Bool { state.withLock { $0.ended } }

    /// Lets no further read reach the connection's body, and waits for one in progress to return (the caller
    /// cancels the reader first, so it returns promptly).
    func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                state.closed = true
                guard state.reading else { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    fileprivate func next() async throws -> ByteBuffer? {
        let admitted = state.withLock { state -> Bool in
            guard !state.closed, !state.reading else { return false }
            state.reading = true
            return true
        }
        guard admitted else { throw Closed() }
        var result: Result<ByteBuffer?, any Error>
        do { result = .success(try await source.next()) } catch { result = .failure(error) }
        switch result {
        case .success(let part?): received.add(part.readableBytes, ordering: .relaxed)
        case .success(nil):
            let count = received.load(ordering: .relaxed)
            if let statedLength, count != statedLength {
                result = .failure(Self.incomplete)
            } else if statedLength == nil, let connected, !connected() {
                result = .failure(Self.incomplete)
            }
        case .failure: break
        }
        let waiters = state.withLock { state in
            state.reading = false
            if case .success(nil) = result { state.ended = true }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
        return try result.get()
    }

    /// The underlying iterator; only the one reader the gate admits touches it.
    private final class IteratorBox: @unchecked Sendable {
        var iterator: RequestBody.AsyncIterator
        init(_ iterator: RequestBody.AsyncIterator) { self.iterator = iterator }
        func next() async throws -> ByteBuffer? { try await iterator.next() }
    }

    struct Sequence: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let gate: BodyGate

        struct AsyncIterator: AsyncIteratorProtocol {
            let gate: BodyGate
            mutating func next() async throws -> ByteBuffer? { try await gate.next() }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(gate: gate) }
    }
}
