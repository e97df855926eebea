import Foundation
import Testing

@testable import Engine

/// A node's judgement of whether its pushes get through, on times the test gives.
@Suite("Push health: a node that cannot push gives up, holds, probes")
struct PushHealthTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func at(_ seconds: Double) -> Date { t0.addingTimeInterval(seconds) }
    static let refused = PushResult.transportFailure(description: "connection refused", resendable: true)

    @Test("Failing with none accepted for the window: hand back once, hold for the window, then probe")
    func cycle() {
        var health = PushHealth(window: .seconds(60))
        #expect(health.mode(at: at(0)) == .pushing)
        health.observe(Self.refused, at: at(0))
        #expect(health.mode(at: at(59)) == .pushing)
        health.observe(.rejected(status: 429, reason: "TooManyProviderTokenUpdates", timestamp: nil), at: at(59))
        #expect(health.mode(at: at(60)) == .handBack)
        #expect(health.mode(at: at(60)) == .holding)
        #expect(health.mode(at: at(119)) == .holding)
        #expect(health.mode(at: at(120)) == .probing)
        #expect(health.mode(at: at(121)) == .probing)
        // The probe fails: give up again at once.
        health.observe(.rejected(status: 503, reason: "ServiceUnavailable", timestamp: nil), at: at(122))
        #expect(health.mode(at: at(122)) == .handBack)
        #expect(health.mode(at: at(123)) == .holding)
        #expect(health.mode(at: at(182)) == .probing)
        // The probe gets through: pushing as usual, and a new failure starts a new window.
        health.observe(.accepted(apnsID: "a"), at: at(183))
        #expect(health.mode(at: at(183)) == .pushing)
        health.observe(Self.refused, at: at(184))
        #expect(health.mode(at: at(243)) == .pushing)
        #expect(health.mode(at: at(244)) == .handBack)
    }

    @Test("One accepted push keeps the node's work; answers about a device or a payload say nothing either way")
    func verdicts() {
        var health = PushHealth(window: .seconds(10))
        health.observe(Self.refused, at: at(0))
        health.observe(.accepted(apnsID: "a"), at: at(9))
        health.observe(Self.refused, at: at(9))
        #expect(health.mode(at: at(18)) == .pushing)
        #expect(health.mode(at: at(19)) == .handBack)
        var devices = PushHealth(window: .seconds(10))
        devices.observe(.rejected(status: 410, reason: "Unregistered", timestamp: Date()), at: at(0))
        devices.observe(.rejected(status: 400, reason: "BadDeviceToken", timestamp: nil), at: at(0))
        #expect(devices.mode(at: at(100)) == .pushing)
        #expect(PushHealth.failing(.rejected(status: 403, reason: "InvalidProviderToken", timestamp: nil)) == true)
        #expect(PushHealth.failing(.rejected(status: 413, reason: "PayloadTooLarge", timestamp: nil)) == nil)
        #expect(PushHealth.failing(.accepted(apnsID: "a")) == false)
    }
}
