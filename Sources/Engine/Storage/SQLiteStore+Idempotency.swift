import Foundation
import GRDB

extension SQLiteStore {
    public func claimIdempotencyKey(
        scope: String,
        key: String,
        requestHash: String,
        at now: Date
    ) async throws
        -> IdempotencyClaim
    {
        try await write { db in
            let seconds = now.unixSeconds
            // Keys past their time go first (every claim sweeps a little: the index makes it cheap).
            try db.execute(
                sql: """
                    DELETE FROM idempotency_keys WHERE created_at < ? OR (status = 0 AND created_at < ?)
                    """,
                arguments: [seconds - IdempotencyWindow.answered, seconds - IdempotencyWindow.unanswered]
            )
            if let row = try Row.fetchOne(
                db,
                sql: "SELECT * FROM idempotency_keys WHERE scope = ? AND key = ?",
                arguments: [scope, key]
            ) {
                return Self.claim(from: row)
            }
            try db.execute(
                sql: """
                    INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at) VALUES (?, ?, ?, 0, ?)
                    """,
                arguments: [scope, key, requestHash, seconds]
            )
            return .claimed
        }
    }

    public func completeIdempotencyKey(scope: String, key: String, response: IdempotentResponse) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE idempotency_keys SET status = ?, content_type = ?, location = ?, body = ?
                    WHERE scope = ? AND key = ?
                    """,
                arguments: [
                    response.status, response.contentType, response.location, Data(response.body), scope, key,
                ]
            )
        }
    }

    public func releaseIdempotencyKey(scope: String, key: String) async throws {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM idempotency_keys WHERE scope = ? AND key = ? AND status = 0",
                arguments: [scope, key]
            )
        }
    }

    static func claim(from row: Row) -> IdempotencyClaim {
        let status: Int = row["status"]
        let hash: String = row["request_hash"]
        guard status != 0 else { return .inProgress(requestHash: hash) }
        let body: Data? = row["body"]
        return .answered(
            requestHash: hash,
            response: IdempotentResponse(
                status: status,
                contentType: row["content_type"],
                location: row["location"],
                body: Array(body ?? Data())
            )
        )
    }
}
