import Engine
import Foundation
import Logging
import NIOCore
import NIOSSL
import Synchronization

/// One OAuth2 access token per service account: fetched with the JWT-bearer grant, cached, refreshed before it
/// expires (at 80% of its life, and at least 5 minutes before), and refreshed once when FCM refuses it.
///
/// One exchange at a time: callers that need a token while one is being fetched wait for it. A failed exchange
/// backs off (doubling from 0.5 s to 8 s, jittered), and callers wait for the next attempt rather than hammering
/// the endpoint, as pushes wait for an APNs pool's next connection: when the endpoint recovers, the waiting pushes
/// go out at the next attempt, at most 12 s later. A caller waits at most `patience`, then fails with the last
/// error (its push's retries and the gateway take over); a refused grant (the account's assertion refused, 4xx)
/// fails at once: waiting does not mend it. Every exchange has a deadline.
public actor FCMAccessTokens: AccessTokenSource {
    public nonisolated let account: FCMServiceAccount
    let tls: TLSConfiguration
    let serverHostname: String?
    let deadline: Duration
    let logger: Logger
    /// When tokens are due for refresh and failures may be retried.
    let clock: any EngineClock
    private var current: (token: String, refreshAt: Date)?
    /// A refused token was dropped and its replacement not fetched yet.
    private var renewing = false
    /// The token fetched to replace a refused one, until a push it carried is accepted.
    private var renewal: String?
    /// Whether a renewal waits for its first accepted push (read without a hop on every answered batch).
    public nonisolated let renewalUnproven = Mutex(false)
    private var fetching: Task<(token: String, lifetime: Duration), any Error>?
    private var failures = 0
    private var retryAt: Date?
    private var lastError: (any Error)?
    /// Exchanges made (for tests and `/inspect`).
    public private(set) var exchanges = 0
    /// How long a caller waits through failed exchanges for a token.
    let patience: Duration
    /// The longest pause between failed exchanges (before jitter).
    static let maximumBackoff = Duration.seconds(8)

    public init(
        account: FCMServiceAccount,
        tls: TLSConfiguration = .makeClientConfiguration(),
        serverHostname: String? = nil,
        deadline: Duration = .seconds(10),
        patience: Duration = .seconds(60),
        clock: any EngineClock = SystemClock(),
        logger: Logger
    ) {
        self.clock = clock
        self.patience = patience
        self.account = account
        self.tls = tls
        self.serverHostname = serverHostname
        self.deadline = deadline
        self.logger = logger
    }

    public func token() async throws -> String {
        let giveUpAt = clock.now.addingTimeInterval(patience.seconds)
        while true {
            if let current, clock.now < current.refreshAt { return current.token }
            if let fetching {
                do {
                    return try await fetching.value.token
                } catch {
                    try checkWaiting(error, giveUpAt: giveUpAt)
                    continue
                }
            }
            if let retryAt, clock.now < retryAt, let lastError {
                try checkWaiting(lastError, giveUpAt: giveUpAt)
                try await clock.sleep(for: .seconds(retryAt.timeIntervalSince(clock.now)))
                continue
            }
            do {
                return try await fetch()
            } catch {
                try checkWaiting(error, giveUpAt: giveUpAt)
            }
        }
    }

    /// Throws `error` when a caller must not wait for the next exchange: a refused grant, a caller out of
    /// patience (or one whose next attempt comes after it), a cancelled caller.
    private func checkWaiting(_ error: any Error, giveUpAt: Date) throws {
        try Task.checkCancellation()
        if (error as? FCMTokenError)?.refusedGrant != nil { throw error }
        if let retryAt, retryAt > giveUpAt { throw error }
        if clock.now >= giveUpAt { throw error }
    }

    /// One exchange; its failure starts (or lengthens) the backoff.
    private func fetch() async throws -> String {
        let task = Task { try await exchange() }
        fetching = task
        defer { fetching = nil }
        do {
            let (token, lifetime) = try await task.value
            let refreshIn = min(lifetime * 0.8, lifetime - .seconds(300))
            current = (token, clock.now + max(refreshIn, .zero).seconds)
            if renewing {
                renewal = token
                renewing = false
                renewalUnproven.withLock { $0 = true }
            }
            failures = 0
            retryAt = nil
            lastError = nil
            return token
        } catch {
            failures += 1
            let pause = min(Duration.milliseconds(500) * (1 << min(failures - 1, 6)), Self.maximumBackoff)
            retryAt = clock.now + (pause * Double.random(in: 0.5...1.5)).seconds
            lastError = error
            if failures == 1 {
                logger.error(
                    "FCM access token exchange failed; it is tried again with backoff",
                    metadata: ["fcm.account": "\(account.clientEmail)", "error": "\(error)"]
                )
            }
            throw error
        }
    }

    /// Drops a token FCM refused (when it is still the current one): the next caller fetches a fresh one, which is
    /// then known as the renewal (`isRenewal`).
    public func invalidate(_ refused: String) {
        guard current?.token == refused else { return }
        current = nil
        renewing = true
    }

    /// Whether `token` was fetched because FCM refused the one before it, and no push it carried was accepted yet:
    /// FCM refusing it too refuses the account.
    public func isRenewal(_ token: String) -> Bool { token == renewal }

    /// FCM accepted a push carrying `token`: a renewal has proved itself, and a later 401 is a new expiry.
    public func accepted(_ token: String) {
        guard token == renewal else { return }
        renewal = nil
        renewalUnproven.withLock { $0 = false }
    }

    /// The JWT-bearer exchange (RFC 7523) over one HTTP/2 connection, closed after it.
    private func exchange() async throws -> (token: String, lifetime: Duration) {
        exchanges += 1
        let uri = account.tokenURI
        guard let host = uri.host else { throw FCMTokenError("token_uri has no host") }
        let port = uri.port ?? 443
        let assertion = try account.assertion(issuedAt: Date())
        var form = URLComponents()
        form.queryItems = [
            URLQueryItem(name: "grant_type", value: "urn:ietf:params:oauth:grant-type:jwt-bearer"),
            URLQueryItem(name: "assertion", value: assertion),
        ]
        let body = ByteBuffer(string: form.percentEncodedQuery ?? "")
        let connection = try await HTTP2ClientConnection.connect(
            host: host,
            port: port,
            tls: tls,
            serverHostname: serverHostname ?? host,
            connectTimeout: TimeAmount(deadline)
        )
        defer { Task { await connection.close() } }
        let path = uri.path.isEmpty ? "/" : uri.path
        let response = try await connection.send(
            [
                HTTP2Header(":method", "POST"), HTTP2Header(":scheme", "https"), HTTP2Header(":path", path),
                HTTP2Header(":authority", uri.port.map { "\(host):\($0)" } ?? host),
                HTTP2Header("content-type", "application/x-www-form-urlencoded"),
                HTTP2Header("content-length", "\(body.readableBytes)"),
            ],
            body: body,
            deadline: TimeAmount(deadline)
        )
        let answer = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
        guard response.status == 200 else {
            let reason = [answer?["error"] as? String, answer?["error_description"] as? String]
                .compactMap { $0 }.joined(separator: ": ")
            // 4xx: the endpoint refuses the account's assertion (invalid_grant: a deleted key, an unknown
            // account); anything else may pass.
            let status = response.status ?? 0
            throw FCMTokenError(
                "the token endpoint answered \(status) \(reason)",
                refusedGrant: (400..<500).contains(status) && status != 429
                    ? (answer?["error"] as? String ?? "HTTP \(status)") : nil
            )
        }
        guard let token = answer?["access_token"] as? String, !token.isEmpty,
            let expiresIn = (answer?["expires_in"] as? NSNumber)?.intValue, expiresIn > 0
        else { throw FCMTokenError("the token endpoint's answer has no access_token or expires_in") }
        return (token, .seconds(expiresIn))
    }
}

public struct FCMTokenError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// The token endpoint refused the account's assertion, with its error (`invalid_grant`): a verdict on the
    /// account, not a passing failure.
    public var refusedGrant: String?

    init(_ description: String, refusedGrant: String? = nil) {
        self.description = description
        self.refusedGrant = refusedGrant
    }
}
