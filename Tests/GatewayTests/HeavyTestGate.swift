/// Lets one heavy test run at a time: one that starts several broker processes and pushes thousands of users
/// (a cluster, a kill or stop mid-burst, a backup drill). Two or three of them at once on CI's two cores starved
/// the rest of the suite past its waits.
actor HeavyTestGate {
    static let shared = HeavyTestGate()

    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` once no other heavy test is running.
    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
