import Foundation
import Logging
import PostgresNIO
import Testing

/// The throwaway PostgreSQL cluster `scripts/test` starts (`scripts/postgres-cluster`) for the PostgreSQL store
/// (issue 21). Run through `swift test` alone, without the cluster's URL, this fails: PostgreSQL is not optional.
@Suite("PostgreSQL test cluster", .timeLimit(.minutes(3)))
struct PostgresClusterTests {
    @Test("The cluster takes connections with postgres-nio and runs a transaction")
    func reachable() async throws {
        let text = try #require(
            ProcessInfo.processInfo.environment["BROKER_TEST_POSTGRES_URL"],
            "no BROKER_TEST_POSTGRES_URL: run ./scripts/test, which starts a throwaway cluster"
        )
        let url = try #require(URLComponents(string: text))
        let configuration = PostgresClient.Configuration(
            host: try #require(url.host),
            port: try #require(url.port),
            username: try #require(url.user),
            password: nil,
            database: String(url.path.dropFirst()),
            tls: .disable
        )
        let client = PostgresClient(configuration: configuration)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            let table = "probe_\(UInt32.random(in: 0...UInt32.max))"
            try await client.withTransaction(logger: Logger(label: "postgres-test")) { connection in
                try await connection.query(
                    "CREATE TEMPORARY TABLE \(unescaped: table) (n INT)",
                    logger: connection.logger
                )
                try await connection.query(
                    "INSERT INTO \(unescaped: table) VALUES (\(41 + 1))",
                    logger: connection.logger
                )
                let rows = try await connection.query("SELECT n FROM \(unescaped: table)", logger: connection.logger)
                var values: [Int] = []
                for try await n in rows.decode(Int.self) { values.append(n) }
                #expect(values == [42])
            }
            let version = try await client.query("SELECT version()")
            for try await text in version.decode(String.self) { #expect(text.hasPrefix("PostgreSQL ")) }
            group.cancelAll()
        }
    }
}
