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
        for reason in PushOutcome.permanentBadRequests {
            #expect(action(400, reason) == .drop(alert: true), "\(reason)")
        }
        #expect(action(400, "BadDeviceToken") == .quarantineToken)
        #expect(action(400, "DeviceTokenNotForTopic") == .removeTokenForTopic)
        #expect(action(400, "IdleTimeout") == .retry(backoff: .milliseconds(100), newConnection: true))
        #expect(action(403, "ExpiredProviderToken") == .renewProviderTokenAndRetry)
        #expect(action(403, "UnrelatedKeyIdInToken") == .retry(backoff: .milliseconds(100), newConnection: true))
        for reason in PushOutcome.tenantConfigurationErrors {
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

    @Test("FCM's answers map to the same outcomes: only UNREGISTERED and a token's INVALID_ARGUMENT judge a device")
    func fcm() throws {
        let token = try DeviceToken(String(repeating: "ab", count: 32))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        func outcome(
            _ status: Int,
            _ code: String?,
            aboutToken: Bool = false,
            retryAfter: Duration? = nil
        )
            -> PushOutcome
        {
            .fcm(status: status, errorCode: code, aboutToken: aboutToken, retryAfter: retryAfter, answeredAt: now)
        }
        #expect(outcome(200, nil) == .accepted)
        // FCM gives no time of its own: the answer's moment is the evidence, so a device registered after it stays.
        #expect(outcome(404, "UNREGISTERED") == .deviceGone(evidence: now))
        #expect(outcome(400, "UNREGISTERED") == .deviceGone(evidence: now))
        #expect(
            policy.action(for: outcome(404, "UNREGISTERED"), attempt: 1) == .removeTokenIfRegisteredBefore(since: now)
        )
        #expect(outcome(400, "INVALID_ARGUMENT", aboutToken: true) == .deviceInvalid)
        #expect(outcome(400, "INVALID_ARGUMENT") == .payloadRefused(alert: true))
        // Credentials, never devices: a 404 without UNREGISTERED (a wrong project) removes nothing either.
        #expect(outcome(403, "SENDER_ID_MISMATCH") == .credentialRefused(reason: "SENDER_ID_MISMATCH"))
        #expect(outcome(401, "THIRD_PARTY_AUTH_ERROR") == .credentialRefused(reason: "THIRD_PARTY_AUTH_ERROR"))
        #expect(outcome(401, nil) == .credentialRefused(reason: "UNAUTHENTICATED"))
        #expect(outcome(403, nil) == .credentialRefused(reason: "PERMISSION_DENIED"))
        #expect(outcome(404, nil) == .payloadRefused(alert: true))
        for result in [outcome(403, "SENDER_ID_MISMATCH"), outcome(401, nil), outcome(404, nil)] {
            #expect(policy.action(for: result, attempt: 1).verdict(on: token) == nil)
        }
        // Retry-After is a floor under the backoff.
        #expect(
            policy.action(for: outcome(429, "QUOTA_EXCEEDED", retryAfter: .seconds(30)), attempt: 1)
                == .retry(backoff: .seconds(30), newConnection: false)
        )
        #expect(outcome(503, "UNAVAILABLE") == .retry(newConnection: false))
        #expect(outcome(500, "INTERNAL") == .retry(newConnection: false))
        #expect(outcome(502, nil) == .retry(newConnection: true))
        #expect(outcome(400, "SOMETHING_NEW") == .payloadRefused(alert: true))
    }

    @Test("The policy decides on outcomes alone: each outcome has one action whichever channel it came from")
    func neutral() {
        let since = Date(timeIntervalSince1970: 1_800_000_000)
        let cases: [(PushOutcome, PushAction)] = [
            (.accepted, .delivered),
            (.retry(newConnection: true), .retry(backoff: .milliseconds(100), newConnection: true)),
            (.retry(newConnection: false, floor: .seconds(5)), .retry(backoff: .seconds(5), newConnection: false)),
            (.connectionFailure(resendable: false), .retry(backoff: .milliseconds(100), newConnection: true)),
            (.deviceGone(evidence: since), .removeTokenIfRegisteredBefore(since: since)),
            (.deviceGone(evidence: nil), .drop(alert: false)),
            (.deviceInvalid, .quarantineToken),
            (.deviceNotForApp, .removeTokenForTopic),
            (.payloadRefused(alert: true), .drop(alert: true)),
            (.credentialExpired, .renewProviderTokenAndRetry),
            (.credentialRefused(reason: "X"), .stopTenant(reason: "X")),
        ]
        for (outcome, expected) in cases {
            #expect(policy.action(for: outcome, attempt: 1, jitter: 0.5) == expected, "\(outcome)")
        }
        // APNs' answers go through the same decisions.
        let apns: [(PushResult, PushOutcome)] = [
            (.accepted(apnsID: "x"), .accepted),
            (.rejected(status: 410, reason: "Unregistered", timestamp: since), .deviceGone(evidence: since)),
            (.rejected(status: 410, reason: "Unregistered", timestamp: nil), .deviceGone(evidence: nil)),
            (.transportFailure(description: "reset", resendable: true), .connectionFailure(resendable: true)),
        ]
        for (result, outcome) in apns {
            #expect(PushOutcome.apns(result) == outcome)
            #expect(policy.action(for: result, attempt: 1) == policy.action(for: outcome, attempt: 1))
        }
    }
}
