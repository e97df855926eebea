import Foundation
import PostgresNIO

extension PostgresStore {
    public func providerToken(teamID: String, keyID: String) async throws -> SharedProviderToken? {
        try await read { [self] connection in
            try await Self.providerToken(connection, teamID: teamID, keyID: keyID, logger: logger)
        }
    }

    public func publishProviderToken(
        teamID: String,
        keyID: String,
        candidate: SharedProviderToken,
        replacing: Date?
    ) async throws -> SharedProviderToken {
        let issuedAt = candidate.issuedAt.timeIntervalSince1970
        let replacing = replacing?.timeIntervalSince1970 ?? -1
        return try await write { [self] connection in
            // Replaces only the token the caller saw (none: -1 matches no row); of nodes publishing at once, the
            // row lock lets one in and the others see its token.
            try await connection.run(
                """
                INSERT INTO provider_tokens (team_id, key_id, token, issued_at)
                VALUES (\(teamID), \(keyID), \(candidate.token), \(issuedAt))
                ON CONFLICT (team_id, key_id) DO UPDATE SET token = excluded.token, issued_at = excluded.issued_at
                WHERE provider_tokens.issued_at = \(replacing)
                """,
                logger
            )
            return try await Self.providerToken(connection, teamID: teamID, keyID: keyID, logger: logger) ?? candidate
        }
    }

    private static func providerToken(
        _ connection: PostgresConnection,
        teamID: String,
        keyID: String,
        logger: Logger
    ) async throws -> SharedProviderToken? {
        guard
            let row = try await connection.rows(
                "SELECT token, issued_at FROM provider_tokens WHERE team_id = \(teamID) AND key_id = \(keyID)",
                logger
            ).first
        else { return nil }
        return SharedProviderToken(
            token: try row.at(0, as: String.self),
            issuedAt: Date(timeIntervalSince1970: try row.at(1, as: Double.self))
        )
    }
}
