import Foundation
import Logging
import PostgresNIO

/// Fresh databases on the throwaway PostgreSQL cluster that `scripts/test` starts (`scripts/postgres-cluster`):
/// one per test that needs a store of its own, so tests running in parallel never see each other's rows.
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
        let cluster = try clusterURL()
        guard let components = URLComponents(string: cluster), let host = components.host,
            let user = components.user
        else { throw Missing() }
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
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
            // CREATE DATABASE takes no parameters; the name is made here, of hex digits only.
            try await connection.query(
                "CREATE DATABASE \(unescaped: name)\(unescaped: owner.map { " OWNER \($0)" } ?? "")",
                logger: logger
            )
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
        var url = components
        url.path = "/" + name
        return url.string ?? cluster
    }
}
