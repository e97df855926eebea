import Foundation
import PostgresNIO
import TestSupport
import Testing

@testable import Engine

/// Several nodes on one PostgreSQL database: due rows are claimed by one node at a time, unsettled deliveries
/// leased to the node pushing them, and both come free when the node that held them stops renewing them.
@Suite("Several nodes on one PostgreSQL database", .timeLimit(.minutes(2)))
struct SharedStoreTests {
    /// A second node on the fixture's database, with claims and leases of `hold`.
    func node(_ f: StoreFixture, hold: Duration) async throws -> PostgresStore {
        var configuration = try StoreFixture.sharedConfiguration(f.location)
        configuration.claimTime = hold
        configuration.leaseTime = hold
        return try await PostgresStore(configuration: configuration, logger: StoreFixture.logger)
    }

    /// Expects `count` claim or lease ends (Unix seconds, the query's one column), each `hold` seconds after a moment
    /// between `before` and `after`.
    func expectEnds(
        _ f: StoreFixture,
        _ query: String,
        _ count: Int,
        _ before: Date,
        _ after: Date,
        _ hold: Double
    ) async throws {
        let ends = try await f.texts(query).compactMap { row in row.first.flatMap { $0 }.flatMap { Double($0) } }
        #expect(ends.count == count)
        for end in ends {
            #expect(
                end >= before.timeIntervalSince1970 + hold - 0.001 && end <= after.timeIntervalSince1970 + hold + 0.001,
                "\(end)"
            )
        }
    }

    @Test("A due row one node claimed is skipped by the others until that node commits it or its claim ends")
    func claims() async throws {
        let f = try await StoreFixture.make(.postgres)
        let first = try await node(f, hold: .seconds(60))
        let second = try await node(f, hold: .seconds(60))
        let now = Date()
        // Every user is due (fire time 0: to be planned). The first node takes one.
        let taken = try await first.dueSchedules(notAfter: now, limit: 1)
        #expect(taken.count == 1)
        // Each node counts the claims it holds (for /inspect and /metrics).
        #expect(try await first.sharedState().claims == 1)
        let rest = try await second.dueSchedules(notAfter: now, limit: 10)
        #expect(rest.count == 2)
        #expect(Set(rest.map(\.user)).isDisjoint(with: taken.map(\.user)))
        // Nothing is left for a third look while both hold their claims; the claimant sees its own again.
        #expect(try await second.dueSchedules(notAfter: now, limit: 10).map(\.user) == rest.map(\.user))
        #expect(try await f.store.dueSchedules(notAfter: now, limit: 10).isEmpty)
        // A next fire time leaves out rows other nodes hold: a third node (the fixture's store) sees none at all, so
        // it sleeps instead of polling rows it cannot take; the first node still sees its own.
        #expect(try await f.store.nextFireTime() == nil)
        #expect(try await first.nextFireTime() == taken.first?.fireAt)
        // The commit moves the row and releases the claim.
        let entry = try #require(taken.first)
        // Whole seconds: a time survives the trip through Unix seconds exactly.
        let fireAt = Date(timeIntervalSince1970: (now.timeIntervalSince1970 - 1).rounded(.down))
        let next = PlannedFire(date: try LocalDate(parsing: "2026-11-24"), fireAt: fireAt)
        _ = try await first.commitSchedules([
            ScheduleUpdate(
                tenant: entry.tenant,
                user: entry.user,
                expectedFireAt: entry.fireAt,
                delivery: nil,
                next: next
            )
        ])
        #expect(try await first.sharedState().claims == 0)
        let again = try await second.dueSchedules(notAfter: now, limit: 10)
        #expect(again.contains { $0.user == entry.user && $0.fireAt == next.fireAt })
    }

    @Test("A claim that ends (its node died) lets another node take the row")
    func expiredClaims() async throws {
        let f = try await StoreFixture.make(.postgres)
        let dying = try await node(f, hold: .seconds(4))
        let survivor = try await node(f, hold: .seconds(60))
        let before = Date()
        #expect(try await dying.dueSchedules(notAfter: Date(), limit: 10).count == 3)
        let after = Date()
        #expect(try await survivor.dueSchedules(notAfter: Date(), limit: 10).isEmpty)
        // Each claim ends its hold after it was taken ...
        try await expectEnds(
            f,
            "SELECT CAST(claimed_until AS TEXT) FROM schedules WHERE claimed_by = '\(dying.nodeID)'",
            3,
            before,
            after,
            4
        )
        // ... and once it has ended (here by hand, not by waiting), another node takes the rows.
        _ = try await f.texts("UPDATE schedules SET claimed_until = 0 WHERE claimed_by = '\(dying.nodeID)' RETURNING 1")
        #expect(try await survivor.dueSchedules(notAfter: Date(), limit: 10).count == 3)
    }

    @Test("A live node's ended leases stay its own: it takes them again; another node only once it is gone")
    func liveNodeLeases() async throws {
        let f = try await StoreFixture.make(.postgres)
        let pushing = try await node(f, hold: .seconds(60))
        let sweeping = try await node(f, hold: .seconds(60))
        _ = try await pushing.heartbeat(host: "pushing", now: Date())
        _ = try await sweeping.heartbeat(host: "sweeping", now: Date())
        let recorded = try await pushing.recordDeliveries(
            [f.a, f.b].map {
                NewDelivery(
                    tenant: f.acme,
                    user: $0.id,
                    impulse: try! ImpulseID("one"),
                    kind: .manual,
                    assignedAt: Date(),
                    awaitsPush: true
                )
            }
        )
        let since = Date().addingTimeInterval(-3600)
        // Its leases end while its queue is still long (a loaded machine): ended here by hand, without waiting.
        func endLeases() async throws {
            _ = try await f.texts("UPDATE unsettled_deliveries SET leased_until = 0 RETURNING delivery_id")
        }
        try await endLeases()
        #expect(try await sweeping.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10).isEmpty)
        // The node itself takes them again (a push it deferred).
        let retaken = try await pushing.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10)
        #expect(retaken.map(\.id) == recorded.map(\.id))
        // Gone from the nodes table (its heartbeat stopped): its ended leases go to another node.
        try await endLeases()
        _ = try await f.texts("DELETE FROM nodes WHERE id = '\(pushing.nodeID)' RETURNING id")
        let taken = try await sweeping.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10)
        #expect(taken.map(\.id) == recorded.map(\.id))
    }

    @Test("Deliveries awaiting their push are leased to the node that recorded them; another takes them when it ends")
    func leases() async throws {
        let f = try await StoreFixture.make(.postgres)
        let pushing = try await node(f, hold: .seconds(4))
        let sweeping = try await node(f, hold: .seconds(60))
        #expect(pushing.leasesUnsettledDeliveries)
        let impulse = try ImpulseID("one")
        let before = Date()
        let recorded = try await pushing.recordDeliveries(
            [f.a, f.b].map {
                NewDelivery(
                    tenant: f.acme,
                    user: $0.id,
                    impulse: impulse,
                    kind: .manual,
                    assignedAt: Date(),
                    awaitsPush: true
                )
            }
        )
        #expect(recorded.count == 2)
        let since = Date().addingTimeInterval(-3600)
        // Being pushed: the other node's sweep leaves them alone.
        #expect(try await sweeping.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10).isEmpty)
        // One is pushed before the lease ends; the other is not (the node died).
        try await pushing.applyMarks([
            DeliveryMark(
                tenant: f.acme,
                delivery: recorded[0].id,
                kind: .pushed(apnsID: "x", channels: .apns),
                at: Date()
            )
        ])
        // The lease ends its hold after the delivery was recorded; ended here by hand, not by waiting.
        let leased = "SELECT CAST(leased_until AS TEXT) FROM unsettled_deliveries WHERE leased_by = '\(pushing.nodeID)'"
        try await expectEnds(f, leased, 1, before, Date(), 4)
        _ = try await f.texts("UPDATE unsettled_deliveries SET leased_until = 0 RETURNING 1")
        let taken = try await sweeping.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10)
        #expect(taken.map(\.id) == [recorded[1].id])
        // Now the sweeping node holds it: nobody else gets it while it pushes.
        #expect(try await pushing.unsettledDeliveries(assignedAfter: since, after: nil, limit: 10).isEmpty)
        #expect(try await f.count("unsettled_deliveries WHERE leased_by = '\(sweeping.nodeID)'") == 1)
        #expect(try await sweeping.sharedState().leases == 1)
        // A delivery awaits its outcome in `unsettled_deliveries` exactly while its `settled_at` is empty.
        #expect(try await f.count("unsettled_deliveries") == 1)
        #expect(try await f.count("deliveries WHERE settled_at IS NULL") == 1)
        try await sweeping.applyMarks([
            DeliveryMark(tenant: f.acme, delivery: recorded[1].id, kind: .settled, at: Date())
        ])
        #expect(try await f.count("unsettled_deliveries") == 0)
        #expect(try await f.count("deliveries WHERE settled_at IS NULL") == 0)
        #expect(try await sweeping.sharedState().leases == 0)
    }

    @Test("Two nodes starting together on an empty database migrate it once")
    func concurrentMigrations() async throws {
        let url = try await PostgresTestDatabases.make() + "?sslmode=disable&pool=2"
        let stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await PostgresStore(
                        configuration: try PostgresStoreConfiguration(url: url),
                        logger: StoreFixture.logger
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(stores.count == 3)
        for store in stores { #expect(try await store.schemaVersions() == PostgresStore.migrations.map(\.version)) }
    }

    @Test("A database of version 3 moves its deliveries awaiting an outcome, with their leases, to their own table")
    func migrationOfUnsettledDeliveries() async throws {
        let url = try await PostgresTestDatabases.make()
        let components = try #require(URLComponents(string: url))
        let logger = StoreFixture.logger
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: try #require(components.host),
                port: components.port ?? 5432,
                username: try #require(components.user),
                password: nil,
                database: String(components.path.dropFirst()),
                tls: .disable
            ),
            id: 1,
            logger: logger
        )
        // The schema as a broker of version 3 left it, with one delivery pushed and one leased to a node.
        try await connection.query(
            "CREATE TABLE broker_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz)",
            logger: logger
        )
        for migration in PostgresStore.migrations where migration.version <= 3 {
            for statement in migration.statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await connection.query(
                "INSERT INTO broker_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                logger: logger
            )
        }
        for statement in [
            "INSERT INTO tenants VALUES ('acme', 'Acme', 'EN', 'UTC', 480, 1, 't', 0, NULL)",
            "INSERT INTO users (id, tenant_id, username, password_hash, life_areas, enabled, weekdays, created_at) "
                + "VALUES (1, 'acme', 'a', 'x', '', true, 127, 0)",
            "INSERT INTO deliveries (id, tenant_id, user_id, impulse_id, kind, assigned_at, pushed_at, settled_at) "
                + "VALUES (1, 'acme', 1, 'one', 'manual', 100, 101, 101)",
            "INSERT INTO deliveries (id, tenant_id, user_id, impulse_id, kind, assigned_at, leased_by, leased_until) "
                + "VALUES (2, 'acme', 1, 'one', 'manual', 100, 'old-node', 4102444800)",
        ] {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        try await connection.close()

        let store = try await PostgresStore(
            configuration: try StoreFixture.sharedConfiguration(url + "?sslmode=disable&pool=2"),
            logger: logger
        )
        #expect(try await store.schemaVersions() == PostgresStore.migrations.map(\.version))
        let rows = try await store.read { connection in
            try await connection.rows(
                "SELECT delivery_id, assigned_at, leased_by, leased_until FROM unsettled_deliveries",
                logger
            )
        }
        #expect(rows.count == 1)
        #expect(try rows.first?.at(0, as: Int64.self) == 2 && rows.first?.at(1, as: Double.self) == 100)
        #expect(
            try rows.first?.at(2, as: String.self) == "old-node" && rows.first?.at(3, as: Double.self) == 4_102_444_800
        )
        // The old node's lease holds: this node's sweep leaves the delivery alone.
        #expect(try await store.unsettledDeliveries(assignedAfter: .distantPast, after: nil, limit: 10).isEmpty)
        await store.close()
    }

    @Test("A change on one node wakes the other's change feed follower at once (NOTIFY), not at its next poll")
    func notifications() async throws {
        let f = try await StoreFixture.make(.postgres)
        let listening = try await node(f, hold: .seconds(60))
        // The first wait starts the listener and returns at once (a change may have come before it listened).
        await listening.waitForChanges(upTo: .seconds(60))
        let started = ContinuousClock.now
        let woken = Task {
            await listening.waitForChanges(upTo: .seconds(60))
            return started.duration(to: .now)
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await f.store.setPassword(tenant: f.acme, username: "a", passwordHash: "changed"))
        let waited = await woken.value
        // Woken by the announcement: long before the minute the wait would otherwise take.
        #expect(waited < .seconds(30), "\(waited)")
        #expect(try await listening.changes(after: 0, limit: 100).last?.subject == .credentials(username: "a"))
        await listening.close()
    }
}

@Suite("PostgreSQL URLs")
struct PostgresURLTests {
    @Test("A database URL gives host, port, user, database, TLS mode and pool; the password never shows")
    func parsing() throws {
        let full = try PostgresStoreConfiguration(
            url: "postgres://broker:s3cret@db.internal:6432/impulse?sslmode=verify-full&sslrootcert=/etc/ca.pem&pool=8"
        )
        #expect(full.host == "db.internal" && full.port == 6432 && full.username == "broker")
        #expect(full.password == "s3cret" && full.database == "impulse" && full.maximumConnections == 8)
        #expect(full.tls == .verifyFull && full.rootCertificates == "/etc/ca.pem")
        #expect(!full.redacted.contains("s3cret"))
        let plain = try PostgresStoreConfiguration(url: "postgresql://broker@localhost/impulse")
        #expect(plain.port == 5432 && plain.tls == .prefer && plain.password == nil)
        #expect(
            PostgresStoreConfiguration.isURL("postgres://x") && !PostgresStoreConfiguration.isURL("./broker.sqlite")
        )
    }

    @Test(
        "A wrong URL is refused with what is wrong, never echoing the password",
        arguments: [
            ("postgres://db.internal/impulse", "no user"),
            ("postgres://broker:pw@db.internal", "no database"),
            ("postgres://broker:pw@/impulse", "no host"),
            ("postgres://broker:pw@db/impulse?sslmode=allow", "sslmode must be one of"),
            ("postgres://broker:pw@db/impulse?sslrootcert=/ca.pem", "sslrootcert needs"),
            ("postgres://broker:pw@db/impulse?pool=0", "pool must be"),
            ("postgres://broker:pw@db/impulse?password=pw", "unknown database URL parameter password"),
        ]
    )
    func refused(_ url: String, _ message: String) throws {
        #expect {
            _ = try PostgresStoreConfiguration(url: url)
        } throws: { error in
            let text = (error as? EngineError)?.message ?? ""
            return text.contains(message) && !text.contains("pw@")
        }
    }
}

/// The cluster's role `broker_secret` logs in only over TLS with its password (`scripts/postgres-cluster`).
@Suite("PostgreSQL over TLS, with a password", .timeLimit(.minutes(2)))
struct PostgresTLSTests {
    /// The test cluster's URL for `broker_secret` on a new database it owns, at `host`, with `query`.
    func url(host: String = "localhost", _ query: String) async throws -> String {
        var components = try #require(
            URLComponents(string: try await PostgresTestDatabases.make(owner: "broker_secret"))
        )
        components.user = "broker_secret"
        components.host = host
        return (components.string ?? "") + "?" + query
    }

    func open(_ url: String, password: String?) async throws -> PostgresStore {
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.password = password
        // Refusals come at once; a start that works may take seconds when the whole suite loads the machine.
        configuration.connectTimeout = .seconds(10)
        return try await PostgresStore(configuration: configuration, logger: StoreFixture.logger)
    }

    @Test("verify-full against the server's certificate, with the password: the store opens and works")
    func verified() async throws {
        let ca = try PostgresTestDatabases.certificate()
        let store = try await open(
            try await url("sslmode=verify-full&sslrootcert=\(ca)"),
            password: try PostgresTestDatabases.secretPassword()
        )
        try await store.createTenant(try Tenant(id: TenantID("tls"), name: "TLS", apnsTopic: "t"))
        #expect(try await store.tenants().map(\.id.rawValue) == ["tls"])
        await store.close()
    }

    @Test("require encrypts without checking the certificate")
    func required() async throws {
        let store = try await open(
            try await url("sslmode=require"),
            password: try PostgresTestDatabases.secretPassword()
        )
        #expect(try await store.schemaVersions().count == PostgresStore.migrations.count)
        await store.close()
    }

    @Test(
        "No TLS, a certificate no root vouches for, the wrong host name or the wrong password: refused with the reason, never the password",
        arguments: ["plain", "untrusted", "hostname", "password"]
    )
    func refused(_ case: String) async throws {
        let password = try PostgresTestDatabases.secretPassword()
        let ca = try PostgresTestDatabases.certificate()
        let (url, given, reason): (String, String, String) =
            switch `case` {
            case "plain": (try await url("sslmode=disable"), password, "28000")  // pg_hba rejects it
            case "untrusted": (try await url("sslmode=verify-full"), password, "sslError")
            case "hostname":
                // The certificate names localhost, not the address it listens on.
                (
                    try await url(host: "127.0.0.1", "sslmode=verify-full&sslrootcert=\(ca)"), password,
                    "failedToValidateHostname"
                )
            default: (try await url("sslmode=verify-full&sslrootcert=\(ca)"), "wrong-" + password, "28P01")
            }
        do {
            let store = try await open(url, password: given)
            await store.close()
            Issue.record("\(`case`): the store opened")
        } catch let error as EngineError {
            #expect(error.message.contains(reason), "\(error.message)")
            #expect(!error.message.contains(password))
        }
    }
}
