import Engine
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Fresh databases on the throwaway PostgreSQL cluster that `scripts/test` starts (`scripts/postgres-cluster`):
/// one per test that needs a store of its own, so tests running in parallel never see each other's rows.
///
/// Most tests want the current schema: ``makeMigrated()`` copies a template database migrated once per test
/// process (`CREATE DATABASE … TEMPLATE`, a file copy inside the server) instead of running every migration for
/// every test. Migrated one by one, a hundred tests starting together held a hundred connections idle in
/// transaction while the test process, at one core's worth of CPU, fed them their statements: on a slower or busier
/// machine the suite's first minutes ran past its time limits. ``make(owner:)`` still gives an empty database, for
/// the tests of migrations and upgrades themselves.
public enum PostgresTestDatabases {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String {
            "no BROKER_TEST_POSTGRES_URL: run ./scripts/test, which starts a throwaway PostgreSQL cluster "
                + "(PostgreSQL is not optional; no test is skipped without it)"
        }
    }

    /// The cluster's URL (its `broker_test` database).
    public static func clusterURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["BROKER_TEST_POSTGRES_URL"], !url.isEmpty else {
            throw Missing()
        }
        return url
    }

    /// The cluster's TLS certificate (for `sslrootcert`) and the password of its role `broker_secret`, which logs in
    /// only over TLS and with that password.
    public static func certificate() throws -> String { try variable("BROKER_TEST_POSTGRES_CA") }
    public static func secretPassword() throws -> String { try variable("BROKER_TEST_POSTGRES_PASSWORD") }

    private static func variable(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { throw Missing() }
        return value
    }

    /// Creates an empty database (owned by `owner`, the cluster's superuser by default) and returns its
    /// `postgres://` URL. The cluster is removed after the run, and its databases with it.
    public static func make(owner: String? = nil) async throws -> String {
        try await create(owner: owner, template: nil)
    }

    /// Creates a database holding the current schema (no rows), copied from this process's template, and returns
    /// its `postgres://` URL.
    public static func makeMigrated() async throws -> String {
        try await create(owner: nil, template: try await template())
    }

    /// The template's name once it is migrated; the first caller makes it, the others wait for it. A failure is
    /// not kept: the next caller tries again.
    private static let templateTask = Mutex<Task<String, any Error>?>(nil)

    private static func template() async throws -> String {
        let task = templateTask.withLock { task in
            if let task { return task }
            let made = Task { try await makeTemplate() }
            task = made
            return made
        }
        do {
            return try await task.value
        } catch {
            templateTask.withLock { if $0 == task { $0 = nil } }
            throw error
        }
    }

    /// An empty database migrated by the store itself, closed, and then marked as a template that takes no
    /// connections (a template being copied must have none).
    private static func makeTemplate() async throws -> String {
        let url = try await create(owner: nil, template: nil)
        let name = String(try requireComponents(url).path.dropFirst())
        var logger = Logger(label: "postgres-test-template")
        logger.logLevel = .critical
        let store = try await PostgresStore(
            configuration: try PostgresStoreConfiguration(url: url + "?sslmode=disable&pool=1"),
            logger: logger
        )
        await store.close()
        try await withClusterConnection { connection, logger in
            try await connection.query(
                "ALTER DATABASE \(unescaped: name) WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
                logger: logger
            )
        }
        return name
    }

    private static func create(owner: String?, template: String?) async throws -> String {
        let cluster = try clusterURL()
        var components = try requireComponents(cluster)
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // CREATE DATABASE takes no parameters; the names are made here, of hex digits only.
        let clauses = (owner.map { " OWNER \($0)" } ?? "") + (template.map { " TEMPLATE \($0)" } ?? "")
        try await withClusterConnection { connection, logger in
            try await connection.query("CREATE DATABASE \(unescaped: name)\(unescaped: clauses)", logger: logger)
        }
        components.path = "/" + name
        return components.string ?? cluster
    }

    /// One connection to the cluster's own database, as its superuser, closed after `body`.
    private static func withClusterConnection(
        _ body: (PostgresConnection, Logger) async throws -> Void
    ) async throws {
        let components = try requireComponents(try clusterURL())
        guard let host = components.host, let user = components.user else { throw Missing() }
        let configuration = PostgresConnection.Configuration(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: nil,
            database: String(components.path.dropFirst()),
            tls: .disable
        )
        let logger = Logger(label: "postgres-test-databases")
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        do {
            try await body(connection, logger)
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }

    private static func requireComponents(_ url: String) throws -> URLComponents {
        guard let components = URLComponents(string: url), components.host != nil, components.user != nil else {
            throw Missing()
        }
        return components
    }
}
