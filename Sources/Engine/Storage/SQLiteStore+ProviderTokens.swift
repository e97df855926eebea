import Foundation
import GRDB

extension SQLiteStore {
    public func providerToken(teamID: String, keyID: String) async throws -> SharedProviderToken? {
        try await read { db in try Self.providerToken(db, teamID: teamID, keyID: keyID) }
    }

    public func publishProviderToken(
        teamID: String,
        keyID: String,
        candidate: SharedProviderToken,
        replacing: Date?
    ) async throws -> SharedProviderToken {
        try await write { db in
            // Replaces only the token the caller saw (none: -1 matches no row).
            try db.execute(
                sql: """
                    INSERT INTO provider_tokens (team_id, key_id, token, issued_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (team_id, key_id) DO UPDATE SET token = excluded.token, issued_at = excluded.issued_at
                    WHERE provider_tokens.issued_at = ?
                    """,
                arguments: [
                    teamID, keyID, candidate.token, candidate.issuedAt.timeIntervalSince1970,
                    replacing?.timeIntervalSince1970 ?? -1,
                ]
            )
            return try Self.providerToken(db, teamID: teamID, keyID: keyID) ?? candidate
        }
    }

    private static func providerToken(_ db: Database, teamID: String, keyID: String) throws -> SharedProviderToken? {
        try Row.fetchOne(
            db,
            sql: "SELECT token, issued_at FROM provider_tokens WHERE team_id = ? AND key_id = ?",
            arguments: [teamID, keyID]
        ).map { SharedProviderToken(token: $0["token"], issuedAt: Date(timeIntervalSince1970: $0["issued_at"])) }
    }
}
