import Foundation
import Gateway
import Testing

@Suite("Application lifecycle")
struct AppLifecycleTests {
    @Test("shutdown() stops the broker as a signal would: its HTTPS listener stops accepting connections")
    func gracefulShutdown() async throws {
        try await TestBroker.run { broker in
            let before = try await broker.send(.GET, "/CurrentImpulse")
            #expect(before.status == 200)
            await broker.application.shutdown()
            var refused = false
            let deadline = ContinuousClock.now + .seconds(10)
            while !refused, ContinuousClock.now < deadline {
                do {
                    _ = try await broker.send(.GET, "/CurrentImpulse", timeout: .seconds(2))
                    try await Task.sleep(for: .milliseconds(50))
                } catch {
                    refused = true
                }
            }
            #expect(refused, "the listener still answered 10 s after shutdown()")
        }
    }
}
