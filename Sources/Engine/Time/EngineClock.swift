import Foundation

/// Time as the engine's loops see it: the wall clock they plan by and the pauses they take. The system's in
/// production; a test's `ManualClock` (TestSupport) moves it by hand, so that a test of a backoff or a timeout
/// advances time instead of sleeping through it.
public protocol EngineClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
    /// Returns after `duration` of this clock's time, or throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The system's clock: `Date()` and `Task.sleep`.
public struct SystemClock: EngineClock {
    public init() {}
    public var now: Date { Date() }
    public func sleep(for duration: Duration) async throws { try await Task.sleep(for: duration) }
}
