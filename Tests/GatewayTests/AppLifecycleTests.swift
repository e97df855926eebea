import Foundation
import Gateway
import InMemoryLogging
import Logging
import TestSupport
import Testing

@Suite("Application lifecycle")
struct AppLifecycleTests {
    @Test("shutdown() stops the broker as a signal would: its HTTPS listener stops accepting connections")
    func shutdownClosesListener() async throws {
        try await TestBroker.run { broker in
            let before = try await broker.send(.GET, "/CurrentImpulse")
            #expect(before.status == 200)
            await broker.application.shutdown()
            // A new connection each time: a connection opened before the stop may still be answered.
            let port = broker.httpsPort
            let refused = try await eventually(seconds: 60) {
                do {
                    let probe = try await RawHTTP2Client.connect(port: port, preface: false, tls: false)
                    await probe.close()
                    return false
                } catch {
                    return true
                }
            }
            #expect(refused, "the listener still accepted connections 60 s after shutdown()")
        }
    }

    @Test("A graceful shutdown is logged when it starts and when every service has stopped")
    func shutdownIsLogged() async throws {
        let log = Self.capture()
        try await TestBroker.run(logger: log.logger) { broker in
            #expect(log.handler.entries.filter { $0.message.description.hasPrefix("shutting down") }.isEmpty)
            await broker.application.shutdown()
            // Within the grace period (20 s): an HTTP/2 client that keeps its connection after GOAWAY holds the
            // listener for up to the 10 s graceful-close timeout, longer when the suite loads the machine.
            let stopped = try await eventually(seconds: 30) {
                log.handler.entries.contains { $0.message == "stopped" }
            }
            #expect(stopped, "no 'stopped' line within 30 s")
        }
        let entries = log.handler.entries
        let start = try #require(entries.firstIndex { $0.message.description.hasPrefix("shutting down") })
        let end = try #require(entries.firstIndex { $0.message == "stopped" })
        #expect(start < end)
        #expect(entries[start].level == .notice && entries[end].level == .notice)
        #expect(entries[start].metadata["grace_period_s"] == "20")  // TestBroker's default, as the broker's
        #expect(entries[end].metadata["shutdown_ms"] != nil)
    }

    @Test("A shutdown that outlasts the grace period ends with a warning that pushes stay unsettled")
    func gracePeriodRunOut() async throws {
        let log = Self.capture()
        // No service stops within a microsecond: the group cancels the rest.
        try await TestBroker.run(logger: log.logger, shutdownGracePeriod: .microseconds(1)) { broker in
            await broker.application.shutdown()
            let warned = try await eventually(seconds: 30) {
                log.handler.entries.contains { $0.message.description.hasPrefix("stopped after the grace period") }
            }
            #expect(warned, "\(log.handler.entries.map(\.message))")
        }
        let last = try #require(log.handler.entries.last { $0.message.description.hasPrefix("stopped") })
        #expect(last.level == .warning)
        #expect(!log.handler.entries.contains { $0.message == "stopped" })
    }

    static func capture() -> (handler: InMemoryLogHandler, logger: Logger) {
        var handler = InMemoryLogHandler()
        handler.logLevel = .notice
        let capture = handler
        return (capture, Logger(label: "broker", factory: { _ in capture }))
    }
}
