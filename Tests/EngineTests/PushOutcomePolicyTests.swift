import Foundation
import Testing

@testable import Engine

@Suite("Push outcome policy")
struct PushOutcomePolicyTests {
    let policy = PushOutcomePolicy(maximumAttempts: 3, baseBackoff: .milliseconds(100), maximumBackoff: .seconds(1))

    func action(_ status: Int, _ reason: String, timestamp: Date? = nil, attempt: Int = 1) -> PushAction {
        policy.action(
            for: .rejected(status: status, reason: reason, timestamp: timestamp),
            attempt: attempt,
            jitter: 0.5
        )
    }

    @Test("Every reason of the APNs table maps to its action")
    func table() {
        for reason in PushOutcomePolicy.permanentBadRequests {
            #expect(action(400, reason) == .drop(alert: true), "\(reason)")
        }
        #expect(action(400, "BadDeviceToken") == .quarantineToken)
        #expect(action(400, "DeviceTokenNotForTopic") == .removeTokenForTopic)
        #expect(action(400, "IdleTimeout") == .retry(backoff: .milliseconds(100), newConnection: true))
        #expect(action(403, "ExpiredProviderToken") == .renewProviderTokenAndRetry)
        #expect(action(403, "UnrelatedKeyIdInToken") == .retry(backoff: .milliseconds(100), newConnection: true))
        for reason in PushOutcomePolicy.tenantConfigurationErrors {
            #expect(action(403, reason) == .stopTenant(reason: reason), "\(reason)")
        }
        #expect(action(404, "BadPath") == .drop(alert: true))
        #expect(action(405, "MethodNotAllowed") == .drop(alert: true))
        #expect(action(413, "PayloadTooLarge") == .drop(alert: true))
        let since = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(action(410, "Unregistered", timestamp: since) == .removeTokenIfRegisteredBefore(since: since))
        #expect(action(410, "ExpiredToken", timestamp: since) == .removeTokenIfRegisteredBefore(since: since))
        #expect(action(410, "Unregistered") == .drop(alert: false))
        #expect(action(429, "TooManyProviderTokenUpdates") == .retry(backoff: .seconds(60), newConnection: false))
        #expect(action(429, "TooManyRequests") == .retry(backoff: .milliseconds(100), newConnection: false))
        #expect(action(500, "InternalServerError") == .retry(backoff: .milliseconds(100), newConnection: false))
        #expect(action(503, "ServiceUnavailable") == .retry(backoff: .milliseconds(100), newConnection: false))
        #expect(action(503, "Shutdown") == .retry(backoff: .milliseconds(100), newConnection: true))
        #expect(policy.action(for: .accepted(apnsID: "x"), attempt: 1) == .delivered)
    }

    @Test("Unknown reasons are kept apart, never a crash: 4xx drops with an alert, 5xx retries")
    func unknownReasons() {
        #expect(action(400, "SomethingNew") == .drop(alert: true))
        #expect(action(502, "BadGateway") == .retry(backoff: .milliseconds(100), newConnection: true))
    }

    @Test("Retries back off exponentially with jitter, are capped, and stop after the last attempt")
    func backoff() {
        #expect(
            action(500, "InternalServerError", attempt: 2) == .retry(backoff: .milliseconds(200), newConnection: false)
        )
        #expect(action(500, "InternalServerError", attempt: 3) == .deferred)
        #expect(action(403, "ExpiredProviderToken", attempt: 3) == .drop(alert: true))
        #expect(policy.backoff(attempt: 10, jitter: 1) == .milliseconds(1500))
        #expect(policy.backoff(attempt: 1, jitter: 0) == .milliseconds(50))
        let failure = PushResult.transportFailure(description: "reset", resendable: true)
        #expect(
            policy.action(for: failure, attempt: 3, jitter: 0.5)
                == .retry(backoff: .milliseconds(200), newConnection: true)
        )
    }
}
