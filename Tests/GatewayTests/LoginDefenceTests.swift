import Engine
import Foundation
import HummingbirdBcrypt
import TestSupport
import Testing

@testable import Gateway

@Suite("Failed logins are throttled per username and per address")
struct LoginThrottleTests {
    let alice = LoginThrottle.UsernameKey(tenant: Fixture.acme, username: "alice")
    let bob = LoginThrottle.UsernameKey(tenant: Fixture.acme, username: "bob")
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("A username goes from proceed to slow failures to refusal, and back as time passes")
    func perUsername() {
        var throttle = LoginThrottle()
        for attempt in 0..<10 {
            let verdict = throttle.admit(alice, address: "10.0.0.\(attempt)", now: start)
            #expect(verdict == .proceed(slowFailure: attempt >= 5), "attempt \(attempt)")
        }
        guard case .refuse(let wait) = throttle.check(alice, address: "10.9.9.9", now: start) else {
            Issue.record("the eleventh attempt was not refused")
            return
        }
        #expect(wait > .zero && wait <= .seconds(7))
        // Another user is not affected.
        #expect(throttle.check(bob, address: "10.9.9.9", now: start) == .proceed(slowFailure: false))
        // The score leaks: one point per six seconds.
        #expect(throttle.check(alice, address: "10.9.9.9", now: start + wait) == .proceed(slowFailure: true))
        // Many more failures do not lengthen the refusal beyond the cap (limit + burst).
        for second in 0..<1_000 { _ = throttle.admit(alice, address: nil, now: start + .seconds(6 * second)) }
        guard case .refuse(let capped) = throttle.check(alice, address: "10.9.9.9", now: start + .seconds(5_994)) else {
            Issue.record("not refused after a thousand failures")
            return
        }
        #expect(capped <= .seconds(36))
    }

    @Test("An address that logged in as the user is not locked out by others' failures for that user")
    func trustedAddress() {
        var throttle = LoginThrottle()
        throttle.succeeded(alice, address: "192.0.2.1", now: start)
        for attempt in 0..<40 { _ = throttle.admit(alice, address: "198.51.100.\(attempt)", now: start) }
        #expect(throttle.check(alice, address: "192.0.2.1", now: start) == .proceed(slowFailure: false))
        guard case .refuse = throttle.check(alice, address: "192.0.2.2", now: start) else {
            Issue.record("an untrusted address was not refused")
            return
        }
    }

    @Test("Attempts are charged when admitted, so a concurrent flood meets the limit; a success gives its point back")
    func chargedUpFront() {
        var throttle = LoginThrottle()
        let verdicts = (0..<100).map { _ in throttle.admit(bob, address: "203.0.113.9", now: start) }
        #expect(verdicts.filter { if case .proceed = $0 { true } else { false } }.count == 10)
        var fresh = LoginThrottle()
        for _ in 0..<50 {
            #expect(fresh.admit(alice, address: "192.0.2.1", now: start) == .proceed(slowFailure: false))
            fresh.succeeded(alice, address: "192.0.2.1", now: start)
        }
    }

    @Test("An address is refused after its own failures, whatever usernames it tries")
    func perAddress() {
        var throttle = LoginThrottle()
        for attempt in 0..<30 {
            let user = LoginThrottle.UsernameKey(tenant: Fixture.acme, username: "user\(attempt)")
            _ = throttle.admit(user, address: "203.0.113.7", now: start)
        }
        guard case .refuse(let wait) = throttle.check(bob, address: "203.0.113.7", now: start) else {
            Issue.record("the address was not refused")
            return
        }
        #expect(wait <= .seconds(3))
        #expect(throttle.check(bob, address: "203.0.113.8", now: start) == .proceed(slowFailure: false))
        // Without an address (behind a proxy) only the username counts.
        #expect(throttle.check(bob, address: nil, now: start) == .proceed(slowFailure: false))
    }

    @Test("Behind one shared address, a user who logged in from it is not refused for other people's failures there")
    func sharedAddress() {
        var throttle = LoginThrottle()
        let office = "198.51.100.20"
        throttle.succeeded(bob, address: office, now: start)
        // Colleagues (or a guesser) behind the same NAT fail 40 times with other usernames.
        for attempt in 0..<40 {
            let user = LoginThrottle.UsernameKey(tenant: Fixture.acme, username: "user\(attempt)")
            _ = throttle.admit(user, address: office, now: start)
        }
        guard case .refuse = throttle.check(alice, address: office, now: start) else {
            Issue.record("an untrusted user of the address was not refused")
            return
        }
        // Bob, trusted from there, goes ahead at full speed; and his own attempt is still charged.
        #expect(throttle.admit(bob, address: office, now: start) == .proceed(slowFailure: false))
    }

    @Test("The key tables stay bounded")
    func bounded() {
        var policy = LoginThrottle.Policy()
        policy.capacity = 100
        var throttle = LoginThrottle(policy: policy)
        for attempt in 0..<10_000 {
            let user = LoginThrottle.UsernameKey(tenant: Fixture.acme, username: "u\(attempt)")
            _ = throttle.admit(user, address: "a\(attempt)", now: start)
        }
        #expect(throttle.keyCount <= 101)
    }
}

@Suite("bcrypt checks run from a bounded queue", .timeLimit(.minutes(3)))
struct PasswordVerifierTests {
    static let hash = Bcrypt.hash("right", cost: 8)

    @Test("Right and wrong passwords; identical checks in flight share one run")
    func verifyAndCoalesce() async throws {
        let verifier = PasswordVerifier(capacity: 64, threads: 1)
        #expect(try await verifier.verify("right", hash: Self.hash))
        #expect(try await !verifier.verify("wrong", hash: Self.hash))
        let before = verifier.runs
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { try await verifier.verify("same-guess", hash: Self.hash) } }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: false, count: 20))
        // Twenty callers, at most a couple of runs (one may finish before the others join).
        #expect(verifier.runs - before <= 3, "\(verifier.runs - before) runs")
    }

    @Test("A full queue refuses at once with a Retry-After")
    func fullQueue() async throws {
        let verifier = PasswordVerifier(capacity: 4, threads: 1)
        let refused = try await withThrowingTaskGroup(of: Bool.self) { group in
            for attempt in 0..<30 {
                group.addTask {
                    do {
                        _ = try await verifier.verify("guess-\(attempt)", hash: Self.hash)
                        return false
                    } catch let overloaded as PasswordVerifier.Overloaded {
                        #expect(overloaded.retryAfter >= .seconds(1))
                        return true
                    }
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        // One running and four queued at most at any time: most of thirty arriving together are refused.
        #expect(refused >= 20)
        #expect(verifier.runs <= 10)
    }

    @Test("A check whose caller is cancelled before it runs never runs")
    func cancelled() async throws {
        let verifier = PasswordVerifier(capacity: 1_000, threads: 1)
        let tasks = (0..<200).map { attempt in
            Task { try await verifier.verify("guess-\(attempt)", hash: Self.hash) }
        }
        for task in tasks { task.cancel() }
        var cancelled = 0
        for task in tasks {
            do { _ = try await task.value } catch is CancellationError { cancelled += 1 }
        }
        #expect(cancelled >= 190)
        #expect(verifier.runs <= 10, "\(verifier.runs) runs")
        // A check already running when its caller left finishes on its own, and then nothing is left.
        #expect(try await eventually(seconds: 5) { verifier.pending == 0 })
    }
}

extension Date {
    /// A moment `duration` later (the throttle's tests move time by hand).
    static func + (date: Date, duration: Duration) -> Date { date.addingTimeInterval(duration.seconds) }
}
