import Foundation

/// Waits for a condition that depends on a background service, up to `seconds`, checking every 10 ms.
///
/// A deadline, not a timing requirement: a condition met returns at once, so a long deadline costs a passing test
/// nothing. 20 s by default: the whole suite runs in parallel on two cores, where tests that take 0.2 s alone took
/// 3-8 s and a 5-second window failed twice in about 60 runs.
public func eventually(seconds: Double = 20, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

/// Runs blocking work (waiting for a child process, reading a pipe to its end, a NIO future's `wait()`) on a
/// thread of its own, never on Swift's cooperative pool.
///
/// That pool has one thread per core, two on the CI machines. A test that blocks one of them for the seconds a
/// child process takes halves every other test's progress; two such tests at once stop the whole test process,
/// brokers under test included. That is how unrelated tests' 10-20 s waits ran out together on CI.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}

extension Process {
    /// Waits for the process to end, off the cooperative pool.
    public func exited() async {
        _ = try? await offThePool { [self] in waitUntilExit() }
    }
}
