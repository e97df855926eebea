import Crypto
import Foundation

/// A signed-in console session: who, for which tenant (a tenant admin's), its CSRF token, and when it ends.
/// The store keeps only the SHA-256 of the cookie's value: a copy of the database opens no session.
public struct ConsoleSession: Sendable, Equatable {
    /// Hex SHA-256 of the session cookie's value.
    public var id: String
    public var role: AdminActor.Role
    public var name: String
    /// The tenant of a tenant admin's session; nil for an operator's.
    public var tenant: TenantID?
    /// Every form of the session carries it; a POST without it is refused.
    public var csrfToken: String
    public var createdAt: Date
    public var lastSeenAt: Date

    public init(
        id: String,
        role: AdminActor.Role,
        name: String,
        tenant: TenantID?,
        csrfToken: String,
        createdAt: Date,
        lastSeenAt: Date
    ) {
        self.id = id
        self.role = role
        self.name = name
        self.tenant = tenant
        self.csrfToken = csrfToken
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
    }

    /// The admin API's actor for the session's requests.
    public func actor(requestID: String?) -> AdminActor {
        AdminActor(role: role, name: name, tenant: tenant, requestID: requestID)
    }
}

/// When sessions end: after `idle` without a request, and `absolute` after sign-in whatever happens.
public struct ConsoleSessionPolicy: Sendable, Equatable {
    public var idle: Duration
    public var absolute: Duration
    /// A session's last-seen time is written at most this often (not at every page).
    public var touchInterval: Duration

    public init(
        idle: Duration = .seconds(1800),
        absolute: Duration = .seconds(8 * 3600),
        touchInterval: Duration = .seconds(60)
    ) {
        self.idle = idle
        self.absolute = absolute
        self.touchInterval = touchInterval
    }

    public func isLive(_ session: ConsoleSession, at now: Date) -> Bool {
        now < session.lastSeenAt.addingTimeInterval(Double(idle.components.seconds))
            && now < session.createdAt.addingTimeInterval(Double(absolute.components.seconds))
    }

    public func needsTouch(_ session: ConsoleSession, at now: Date) -> Bool {
        now.timeIntervalSince(session.lastSeenAt) >= Double(touchInterval.components.seconds)
    }

    /// A new session for an actor: the cookie's value (to send once) and the session (to store).
    public static func open(for actor: AdminActor, at now: Date) -> (cookie: String, session: ConsoleSession) {
        let cookie = randomToken()
        let session = ConsoleSession(
            id: hash(cookie),
            role: actor.role,
            name: actor.name,
            tenant: actor.tenant,
            csrfToken: randomToken(),
            createdAt: now,
            lastSeenAt: now
        )
        return (cookie, session)
    }

    public static func hash(_ cookie: String) -> String {
        SHA256.hash(data: Data(cookie.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// 32 random bytes, base64url.
    public static func randomToken() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Compares a form's CSRF token with the session's in constant time.
    public static func matches(_ given: String?, _ expected: String) -> Bool {
        guard let given, given.utf8.count == expected.utf8.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(given.utf8, expected.utf8) { difference |= a ^ b }
        return difference == 0
    }
}

/// Console sessions, shared by every node: the console's port.
public protocol ConsoleSessionStore: Sendable {
    func createConsoleSession(_ session: ConsoleSession) async throws
    func consoleSession(id: String) async throws -> ConsoleSession?
    func touchConsoleSession(id: String, at: Date) async throws
    func deleteConsoleSession(id: String) async throws
    /// Ends every session of an account (sign out everywhere; an operator revoking an admin's); returns how many.
    func deleteConsoleSessions(role: AdminActor.Role, name: String, tenant: TenantID?) async throws -> Int
    /// Deletes sessions not seen since `before`.
    func purgeConsoleSessions(lastSeenBefore before: Date) async throws -> Int
}
