import Foundation
import NIOCore
import _CryptoExtras

/// The simulator's FCM side, on the same listener as its APNs side: Google's OAuth2 token endpoint
/// (`POST /token`) and FCM HTTP v1's `POST /v1/projects/{project}/messages:send`, with the same faults (hang,
/// refuse, drop, GOAWAY, delay and latency; `unavailableUntil` as 503 UNAVAILABLE) and FCM's own
/// (`quotaExceededNext`, `retryAfterSeconds`, `tokenFailNext`). Device tokens marked `unregistered` answer
/// UNREGISTERED, `otherTopic` SENDER_ID_MISMATCH and `otherEnvironment` an INVALID_ARGUMENT on the token.
extension APNsSimulator {
    /// How long an issued access token lasts, as Google's do.
    static let accessTokenLifetime: TimeInterval = 3599

    func handleFCM(_ request: HTTP2ServerRequest, _ connection: HTTP2ServerConnection) {
        let message = request.message
        let connectionID = ObjectIdentifier(connection.channel)
        let now = self.now()
        let validation = FCMValidation(now: now)
        // `execute` labels every answer with a body as JSON.
        let json: [HTTP2Header] = []
        let plan: Plan = state.withLock { state in
            if let fault = Self.fault(&state, request, connectionID) { return fault }
            if message[":path"] == "/token" {
                guard message[":method"] == "POST" else {
                    return .answer(405, [], nil, announce: nil)
                }
                if let until = state.faults.tokenUnavailableUntil, now < until {
                    let failure = FCMValidation.TokenRequestFailure(
                        status: 503,
                        error: "temporarily_unavailable",
                        description: "simulated token endpoint outage"
                    )
                    return .answer(503, json, failure.body, announce: nil)
                }
                if state.faults.tokenFailNext > 0 {
                    state.faults.tokenFailNext -= 1
                    let failure = FCMValidation.TokenRequestFailure(
                        status: 500,
                        error: "internal_failure",
                        description: "simulated token endpoint failure"
                    )
                    return .answer(500, json, failure.body, announce: nil)
                }
                let accounts = state.fcmAccounts
                switch validation.tokenRequest(form: Data(message.body.readableBytesView), accounts: accounts) {
                case .failure(let failure):
                    return .answer(failure.status, json, failure.body, announce: nil)
                case .success(let account):
                    let token = "ya29.sim-" + Self.randomToken()
                    state.fcmIssued[token] = IssuedAccessToken(
                        account: account,
                        project: accounts[account]!.projectID,
                        expiresAt: now + Self.accessTokenLifetime
                    )
                    state.fcmCounts.tokensIssued += 1
                    // Expired tokens are forgotten as new ones are issued: the table stays bounded.
                    if state.fcmIssued.count > 1000 {
                        state.fcmIssued = state.fcmIssued.filter { $0.value.expiresAt > now }
                    }
                    let body: [String: Any] = [
                        "access_token": token, "expires_in": Int(Self.accessTokenLifetime), "token_type": "Bearer",
                    ]
                    let data = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
                    return .answer(200, json, ByteBuffer(bytes: data), announce: nil)
                }
            }
            let retryAfter =
                state.faults.retryAfterSeconds > 0
                ? [HTTP2Header("retry-after", "\(state.faults.retryAfterSeconds)")] : []
            if let until = state.faults.unavailableUntil, now < until {
                state.fcmCounts.rejected += 1
                let refusal = FCMRefusal(
                    status: 503,
                    rpcStatus: "UNAVAILABLE",
                    errorCode: "UNAVAILABLE",
                    message: "The service is currently unavailable."
                )
                return .answer(503, json + retryAfter, refusal.body, announce: nil)
            }
            if state.faults.quotaExceededNext > 0 {
                state.faults.quotaExceededNext -= 1
                state.fcmCounts.rejected += 1
                let refusal = FCMRefusal(
                    status: 429,
                    rpcStatus: "RESOURCE_EXHAUSTED",
                    errorCode: "QUOTA_EXCEEDED",
                    message: "Quota exceeded for quota metric 'Send requests'."
                )
                return .answer(429, json + retryAfter, refusal.body, announce: nil)
            }
            if configuration.benchmarkMode {
                // Minimal work: the credential and the message are not checked, nothing is recorded.
                state.fcmCounts.accepted += 1
                let name =
                    "projects/\(FCMValidation.project(ofPath: message[":path"]) ?? "")/messages/0:\(state.fcmCounts.accepted)"
                return .answer(200, json, ByteBuffer(string: #"{"name":"\#(name)"}"#), announce: nil)
            }
            let issued = state.fcmIssued
            let tokens = state.tokens
            let checked = validation.message(
                method: message[":method"],
                path: message[":path"],
                authorization: message["authorization"],
                body: Data(message.body.readableBytesView),
                issued: { issued[$0] },
                tokenState: { tokens[$0] ?? .valid }
            )
            switch checked {
            case .failure(let refusal):
                state.fcmCounts.rejected += 1
                return .answer(refusal.status, json, refusal.body, announce: nil)
            case .success(var accepted):
                state.fcmCounts.accepted += 1
                accepted.name = "projects/\(accepted.project)/messages/0:\(state.fcmCounts.accepted)"
                state.fcmAccepted.append(accepted)
                if state.fcmAccepted.count > configuration.recordLimit {
                    state.fcmAccepted.removeFirst(state.fcmAccepted.count / 10)
                }
                let data =
                    (try? JSONSerialization.data(withJSONObject: ["name": accepted.name], options: [.sortedKeys]))
                    ?? Data()
                return .answer(200, json, ByteBuffer(bytes: data), announce: nil)
            }
        }
        execute(plan, request, connection)
    }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next(), radix: 36) }.joined()
    }

    // MARK: Control (in-process; the same operations are reachable over `/_simulator/fcm/`)

    /// Makes a service account known to the token endpoint (replacing one of the same address).
    public func setFCMAccount(_ clientEmail: String, _ account: FCMSimulatedAccount) {
        state.withLock { $0.fcmAccounts[clientEmail] = account }
    }

    public var fcmAccepted: [AcceptedFCMMessage] { state.withLock { $0.fcmAccepted } }
    public var fcmCounts: (accepted: Int, rejected: Int, tokensIssued: Int) { state.withLock { $0.fcmCounts } }

    /// Forgets every access token issued (as a revocation does): the next message with one is answered 401.
    public func revokeFCMAccessTokens() {
        state.withLock { $0.fcmIssued.removeAll() }
    }

    public func clearFCMRecord() {
        state.withLock {
            $0.fcmAccepted.removeAll()
            $0.fcmCounts = (0, 0, 0)
        }
    }
}
