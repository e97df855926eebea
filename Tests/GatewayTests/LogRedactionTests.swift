import Engine
import Foundation
import Gateway
import InMemoryLogging
import Logging
import Testing

@Suite("Logs", .timeLimit(.minutes(2)))
struct LogRedactionTests {
    @Test("No password or device token reaches a log line, even at trace level")
    func noSecrets() async throws {
        var handler = InMemoryLogHandler()
        handler.logLevel = .trace
        let capture = handler
        let logger = Logger(label: "broker", factory: { _ in capture })
        let token = String(repeating: "5e", count: 32)
        try await TestBroker.run(logger: logger) { broker in
            _ = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "a"}"#
            )
            _ = try await broker.send(.PUT, "/v1/devices/\(token)", user: "bob", body: #"{"name": "b"}"#)
            _ = try await broker.send(.DELETE, "/v1/devices/\(token)", user: "bob")
            _ = try await broker.send(.GET, "/v1/me", password: "wrong-password-123")
            _ = try await broker.send(.GET, "/v1/devices/\(token)")
        }
        let lines = capture.entries.map { "\($0.message) \($0.metadata)" }
        #expect(lines.contains { $0.contains("device moved to a new owner") })
        #expect(lines.contains { $0.contains("authentication failed") })
        for secret in [token, Fixture.alicePassword, Fixture.bobPassword, "wrong-password-123"] {
            #expect(!lines.contains { $0.contains(secret) }, "a log line contains a secret")
        }
    }
}
