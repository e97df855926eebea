import Engine
import Foundation
import TestSupport
import Testing

@testable import Gateway

/// The console's sessions and refusals over HTTP, without a browser: throttled sign-in, session cookies that end,
/// and tenant boundaries.
@Suite("Console sessions", .timeLimit(.minutes(2)))
struct ConsoleTests {
    func signIn(
        _ broker: TestBroker,
        _ path: String,
        _ name: String,
        _ password: String
    ) async throws
        -> TestBroker.Reply
    {
        try await broker.send(
            .POST,
            path,
            user: nil,
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: "name=\(name)&password=\(password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        )
    }

    static func cookie(_ reply: TestBroker.Reply) -> String? {
        reply.headers["set-cookie"].first?.split(separator: ";").first.map(String.init)
    }

    @Test("Sign-in is throttled; a session opens only its tenant and ends at sign-out or when its admin is disabled")
    func sessions() async throws {
        // Failed sign-ins leak away on the broker's clock, which only this test moves: a loaded machine's slow
        // requests do not let them leak before the right password is tried.
        let clock = ManualClock()
        try await TestBroker.run(clock: clock) { broker in
            // Failures are throttled per username: after ten, even the right password waits.
            var statuses: [Int] = []
            for _ in 0..<11 {
                statuses.append(try await signIn(broker, "/t/acme/console/sign-in", "root", "wrong").status)
            }
            #expect(statuses.last == 429 && !statuses.dropLast().contains(429), "\(statuses)")
            let throttled = try await signIn(broker, "/t/acme/console/sign-in", "root", Fixture.rootPassword)
            #expect(throttled.status == 429 && throttled.text.contains("Too many failed sign-ins"))
            // A minute later the failures have leaked away: the right password opens a session.
            clock.advance(by: .seconds(60))
            #expect(try await signIn(broker, "/t/acme/console/sign-in", "root", Fixture.rootPassword).status == 303)
        }
        try await TestBroker.run { broker in
            // A user who is not an admin may not use the console.
            let user = try await signIn(broker, "/t/acme/console/sign-in", "alice", Fixture.alicePassword)
            #expect(user.status == 403 && Self.cookie(user) == nil)
            let opened = try await signIn(broker, "/t/acme/console/sign-in", "root", Fixture.rootPassword)
            #expect(opened.status == 303 && opened.headers["location"].first == "/t/acme/console")
            let setCookie = opened.headers["set-cookie"].first ?? ""
            #expect(setCookie.hasPrefix("__Host-impulse-console=") && setCookie.contains("Secure"))
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"))
            let cookie = try #require(Self.cookie(opened))
            let today = try await broker.send(.GET, "/t/acme/console", user: nil, headers: [("Cookie", cookie)])
            #expect(today.status == 200 && today.text.contains("Today's dispatch"))
            #expect(today.headers["content-security-policy"].first?.contains("script-src 'self'") == true)
            #expect(today.headers["x-frame-options"].first == "DENY")
            // Another tenant's console, and the operators' page, ask for another sign-in.
            let elsewhere = try await broker.send(.GET, "/t/globex/console", user: nil, headers: [("Cookie", cookie)])
            #expect(elsewhere.status == 303 && elsewhere.headers["location"].first == "/t/globex/console/sign-in")
            let operators = try await broker.send(.GET, "/console", user: nil, headers: [("Cookie", cookie)])
            #expect(operators.status == 303 && operators.headers["location"].first == "/console/sign-in")
            // The session ends when its admin is disabled (here through the admin API).
            _ = try await broker.store.setEnabled(tenant: Fixture.acme, username: "root", enabled: false)
            let disabled = try await broker.send(.GET, "/t/acme/console", user: nil, headers: [("Cookie", cookie)])
            #expect(disabled.status == 303)
            // A made-up cookie opens nothing.
            let forged = try await broker.send(
                .GET,
                "/t/acme/console",
                user: nil,
                headers: [("Cookie", "__Host-impulse-console=" + ConsoleSessionPolicy.randomToken())]
            )
            #expect(forged.status == 303)
        }
    }

    @Test("An operator signs in at /console, sees the tenants, opens any tenant's pages, and signs out")
    func operatorConsole() async throws {
        try await TestBroker.run { broker in
            let added = try await broker.send(
                .POST,
                "/admin/v1/operators",
                user: nil,
                headers: [("Authorization", "Bearer \(Fixture.operatorToken)"), ("Content-Type", "application/json")],
                body: #"{"name": "ops", "password": "0ps-secret"}"#
            )
            #expect(added.status == 201, "\(added.text)")
            let opened = try await signIn(broker, "/console/sign-in", "ops", "0ps-secret")
            #expect(opened.status == 303 && opened.headers["location"].first == "/console")
            let cookie = try #require(Self.cookie(opened))
            let tenants = try await broker.send(.GET, "/console", user: nil, headers: [("Cookie", cookie)])
            #expect(tenants.status == 200 && tenants.text.contains("/t/globex/console"))
            for path in [
                "/t/globex/console", "/t/acme/console/users", "/t/acme/console/report", "/t/acme/console/audit",
            ] {
                let page = try await broker.send(.GET, path, user: nil, headers: [("Cookie", cookie)])
                #expect(page.status == 200, "\(path): \(page.status)")
            }
            // Sign-out needs the session's CSRF token.
            let csrf = try #require(
                tenants.text.components(separatedBy: #"name="csrf" value=""#).dropFirst().first?
                    .split(separator: "\"").first
            )
            let refused = try await broker.send(
                .POST,
                "/console/sign-out",
                user: nil,
                headers: [("Cookie", cookie), ("Content-Type", "application/x-www-form-urlencoded")],
                body: "csrf=wrong"
            )
            #expect(refused.status == 403)
            let out = try await broker.send(
                .POST,
                "/console/sign-out",
                user: nil,
                headers: [("Cookie", cookie), ("Content-Type", "application/x-www-form-urlencoded")],
                body: "csrf=\(csrf)"
            )
            #expect(out.status == 303 && out.headers["set-cookie"].first?.contains("Max-Age=0") == true)
            #expect(try await broker.send(.GET, "/console", user: nil, headers: [("Cookie", cookie)]).status == 303)
        }
    }

    @Test("Sessions end after their idle time and their absolute time; CSRF tokens compare exactly")
    func policy() {
        let policy = ConsoleSessionPolicy(idle: .seconds(1800), absolute: .seconds(8 * 3600))
        let start = Date(timeIntervalSince1970: 1_000_000)
        let actor = AdminActor(role: .tenantAdmin, name: "root", tenant: try? TenantID("acme"))
        var (cookie, session) = ConsoleSessionPolicy.open(for: actor, at: start)
        #expect(session.id == ConsoleSessionPolicy.hash(cookie) && session.id != cookie)
        #expect(policy.isLive(session, at: start.addingTimeInterval(1799)))
        #expect(!policy.isLive(session, at: start.addingTimeInterval(1801)))
        session.lastSeenAt = start.addingTimeInterval(8 * 3600 - 60)
        #expect(!policy.isLive(session, at: start.addingTimeInterval(8 * 3600 + 1)))
        #expect(ConsoleSessionPolicy.matches(session.csrfToken, session.csrfToken))
        #expect(!ConsoleSessionPolicy.matches(nil, session.csrfToken))
        #expect(!ConsoleSessionPolicy.matches(String(session.csrfToken.dropLast()) + "x", session.csrfToken))
        #expect(ConsoleSessionPolicy.randomToken() != ConsoleSessionPolicy.randomToken())
    }
}
