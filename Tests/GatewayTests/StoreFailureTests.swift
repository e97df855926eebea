import Foundation
import GRDB
import NIOSSL
import Synchronization
import TestSupport
import Testing

@testable import Gateway

/// The REST API over a store that stalls: a real SQLite file whose write lock another connection holds, with the
/// broker's busy wait far longer than the request deadline (as a frozen file system would make it wait).
@Suite("A stalled store", .timeLimit(.minutes(2)))
struct StoreFailureTests {
    @Test("A write that cannot finish in time is answered 503 with Retry-After, and works once the store does")
    func stalledWrite() async throws {
        // A deadline the first, uncached login meets even while the rest of the suite loads the machine.
        try await TestBroker.run(requestDeadline: .seconds(3), busyTimeout: .seconds(60)) { broker in
            try await warmUp(broker, "/v1/me")  // the login is cached now
            let lock = try await SQLiteWriteLock.take(path: broker.directory + "/broker.sqlite")
            let started = ContinuousClock.now
            let stalled = try await broker.send(
                .PUT,
                "/v1/me/preferences",
                headers: [("Content-Type", "application/json")],
                body: #"{"deliveryTime": "07:15"}"#,
                timeout: .seconds(15)
            )
            #expect(stalled.status == 503, "\(stalled.text)")
            #expect(stalled.headers["Retry-After"].first.flatMap(Int.init) ?? 0 >= 1)
            #expect(stalled.headers["Content-Type"].first == "application/problem+json")
            #expect(stalled.json["type"] as? String == "urn:impulse-broker:problem:storage-unavailable")
            #expect(started.duration(to: .now) < .seconds(10))  // the deadline, not the 60 s busy wait
            // Reads do not need the write lock: they still answer.
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
            try await lock.release()
            let retried = try await broker.send(
                .PUT,
                "/v1/me/preferences",
                headers: [("Content-Type", "application/json")],
                body: #"{"deliveryTime": "07:20"}"#
            )
            #expect(retried.status == 200, "\(retried.text)")
            let me = try await broker.send(.GET, "/v1/me")
            let preferences = me.json["preferences"] as? [String: Any]
            #expect(preferences?["deliveryTime"] as? String == "07:20", "\(me.text)")
        }
    }
}

/// Admission control: requests in progress are bounded per node (503) and per tenant (429), and work abandoned
/// at its deadline keeps its place until it ends.
@Suite("Admission control", .timeLimit(.minutes(2)))
struct AdmissionTests {
    static let limits = AdmissionLimits(node: 3, perTenant: 2)

    /// The client speaks HTTP/1.1 here: under pressure the broker sends SETTINGS to every HTTP/2 connection, and
    /// AsyncHTTPClient 1.37.0 arms a second idle timer when one reaches an idle connection, an assertion that
    /// crashed the debug test run (HTTPConnectionPool.swift:447). The SETTINGS themselves are tested with a raw
    /// HTTP/2 client below.
    static func run(
        requestDeadline: Duration,
        _ body: @Sendable (TestBroker) async throws -> Void
    ) async throws {
        try await TestBroker.run(
            http1Only: true,
            requestDeadline: requestDeadline,
            busyTimeout: .seconds(60),
            admission: limits,
            body
        )
    }

    /// Leaves six idle HTTP/1.1 connections in the client's pool, so the requests the test times go out at once,
    /// without a TLS handshake each on a loaded machine.
    static func openConnections(_ broker: TestBroker) async throws {
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<6 { group.addTask { try await broker.send(.GET, "/health", user: nil).status } }
            for try await status in group { #expect(status == 200) }
        }
    }

    /// Holds SQLite's write lock, so writes through the broker wait (up to its 60 s busy timeout).
    static func lock(_ broker: TestBroker) async throws -> SQLiteWriteLock {
        let lock = try await SQLiteWriteLock.take(path: broker.directory + "/broker.sqlite")
        return lock
    }

    static func preferences(
        _ broker: TestBroker,
        _ path: String,
        user: String,
        password: String? = nil
    )
        async throws -> TestBroker.Reply
    {
        try await broker.send(
            .PUT,
            path,
            user: user,
            password: password,
            headers: [("Content-Type", "application/json")],
            body: #"{"deliveryTime": "07:15"}"#,
            timeout: .seconds(60)
        )
    }

    @Test("Beyond its share a tenant gets 429 while others are served; beyond the node's bound everyone gets 503")
    func bounds() async throws {
        try await Self.run(requestDeadline: .seconds(60)) { broker in
            // Logins cached first: the requests below then wait only for the store.
            try await warmUp(broker, "/v1/me")
            try await warmUp(broker, "/v1/me", user: "bob")
            let globex = Fixture.globexAlicePassword
            try await warmUp(broker, "/t/globex/v1/me", password: globex)
            try await Self.openConnections(broker)
            let lock = try await Self.lock(broker)
            let alice = Task { try await Self.preferences(broker, "/v1/me/preferences", user: "alice") }
            let bob = Task { try await Self.preferences(broker, "/v1/me/preferences", user: "bob") }
            // Both wait for the store now: acme's share is taken.
            #expect(try await eventually { broker.application.admission.inProgress == 2 })
            let over = try await broker.send(.GET, "/v1/me")
            #expect(over.status == 429, "\(over.text)")
            #expect(over.json["type"] as? String == "urn:impulse-broker:problem:tenant-over-share")
            #expect(over.headers["Retry-After"].first == "1")
            // Another tenant still gets in (a read: it does not wait for the lock).
            #expect(try await broker.send(.GET, "/t/globex/v1/me", password: globex).status == 200)
            let third = Task {
                try await Self.preferences(broker, "/t/globex/v1/me/preferences", user: "alice", password: globex)
            }
            // Three in progress: the node is full.
            #expect(try await eventually { broker.application.admission.inProgress == 3 })
            let full = try await broker.send(.GET, "/t/globex/v1/me", password: globex)
            #expect(full.status == 503, "\(full.text)")
            #expect(full.json["type"] as? String == "urn:impulse-broker:problem:overloaded")
            // A load balancer sees the node alive but not ready: its store takes no write.
            #expect(try await broker.send(.GET, "/health/live", user: nil).status == 200)
            // (Its answer is reused for a second: the one the broker's start read may still stand.)
            #expect(try await eventually { try await broker.send(.GET, "/health", user: nil).status == 503 })
            try await lock.release()
            for task in [alice, bob, third] { #expect(try await task.value.status == 200) }
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
        }
    }

    @Test("Work answered 503 at its deadline keeps its place until it ends")
    func abandonedWorkCounts() async throws {
        try await Self.run(requestDeadline: .seconds(3)) { broker in
            try await warmUp(broker, "/v1/me")
            try await warmUp(broker, "/v1/me", user: "bob")
            let lock = try await Self.lock(broker)
            async let alice = Self.preferences(broker, "/v1/me/preferences", user: "alice")
            async let bob = Self.preferences(broker, "/v1/me/preferences", user: "bob")
            #expect(try await alice.status == 503)
            #expect(try await bob.status == 503)
            // Both writes still wait for the store: acme's share stays taken.
            #expect(try await broker.send(.GET, "/v1/me").status == 429)
            try await lock.release()
            var last = 0
            let freed = try await eventually(seconds: 20) {
                last = try await broker.send(.GET, "/v1/me").status
                return last == 200
            }
            #expect(freed, "still \(last)")
        }
    }
}

/// Logs a user in until it works: the first, uncached login pays bcrypt, which the rest of the suite can delay past
/// a short request deadline (the work then goes on and caches the login anyway).
func warmUp(_ broker: TestBroker, _ path: String, user: String = "alice", password: String? = nil) async throws {
    var last = 0
    let done = try await eventually(seconds: 60) {
        last = try await broker.send(.GET, path, user: user, password: password).status
        return last == 200
    }
    #expect(done, "\(path) as \(user): \(last)")
}

/// Under pressure the HTTP/2 connections are asked for fewer streams, so clients hold their requests back instead
/// of sending what would be refused (BENCHMARKS.md, round 15).
@Suite("Stream governor", .timeLimit(.minutes(3)))
struct StreamGovernorTests {
    @Test("A tenant at its share or a full node lowers the stream limit; it comes back after the relief time")
    func pressure() {
        let governor = StreamGovernor(normal: 100, throttled: 4)
        let admission = AdmissionControl(
            limits: AdmissionLimits(node: 4, perTenant: 2),
            governor: governor,
            relief: .zero
        )
        #expect(admission.admit(tenant: "a") == .admitted)
        #expect(governor.currentLimit == 100)
        #expect(admission.admit(tenant: "a") == .admitted)  // a's share is taken: pressure
        #expect(governor.currentLimit == 4)
        #expect(admission.admit(tenant: "a") == .tenantFull)
        admission.release(tenant: "a")  // a back to half its share, the node to a quarter
        #expect(governor.currentLimit == 100)
        admission.release(tenant: "a")
        #expect(admission.inProgress == 0)
    }

    @Test("An open HTTP/2 connection is sent SETTINGS with the lower limit while the node is under pressure")
    func settingsReachClients() async throws {
        let clock = ManualClock()
        // The requests that press go over HTTP/1.1 (see `AdmissionTests.run`); only the watcher speaks HTTP/2.
        try await TestBroker.run(
            http1Only: true,
            requestDeadline: .seconds(60),
            busyTimeout: .seconds(60),
            admission: AdmissionLimits(node: 4, perTenant: 2),
            clock: clock
        ) { broker in
            try await warmUp(broker, "/v1/me")
            try await warmUp(broker, "/v1/me", user: "bob")
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(broker.directory + "/tls/self-signed.crt")
            let limits = Mutex<[UInt32]>([])
            let watcher = try await HTTP2ClientConnection.connect(
                host: "127.0.0.1",
                port: broker.httpsPort,
                tls: tls,
                serverHostname: "localhost"
            ) { event in
                if case .remoteSettings(let streams) = event { limits.withLock { $0.append(streams) } }
            }
            let lock = try await AdmissionTests.lock(broker)
            let alice = Task { try await AdmissionTests.preferences(broker, "/v1/me/preferences", user: "alice") }
            let bob = Task { try await AdmissionTests.preferences(broker, "/v1/me/preferences", user: "bob") }
            #expect(try await eventually(seconds: 10) { limits.withLock { $0.last } == 4 }, "\(limits.withLock { $0 })")
            try await lock.release()
            #expect(try await alice.value.status == 200)
            #expect(try await bob.value.status == 200)
            // Not before two seconds after the last time the tenant was at its share ...
            clock.advance(by: .seconds(1.9))
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
            #expect(broker.application.admission.governor?.currentLimit == 4)
            // ... and then a finished request lifts the limit.
            clock.advance(by: .seconds(0.1))
            #expect(try await broker.send(.GET, "/v1/me").status == 200)
            #expect(
                try await eventually(seconds: 10) { limits.withLock { $0.last } == 100 },
                "\(limits.withLock { $0 })"
            )
            await watcher.close()
        }
    }
}
