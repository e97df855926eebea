import Foundation
import NIOCore
import PostgresNIO

extension PostgresStore {
    public func claimIdempotencyKey(
        scope: String,
        key: String,
        requestHash: String,
        at now: Date
    ) async throws
        -> IdempotencyClaim
    {
        let seconds = now.unixSeconds
        return try await write { [self] connection in
            try await connection.run(
                """
                DELETE FROM idempotency_keys WHERE scope = \(scope) AND key = \(key)
                    AND (created_at < \(seconds - IdempotencyWindow.answered)
                        OR (status = 0 AND created_at < \(seconds - IdempotencyWindow.unanswered)))
                """,
                logger
            )
            // Two nodes claiming the same key at once: the unique key lets one insert, the other reads its claim.
            let inserted = try await connection.run(
                """
                INSERT INTO idempotency_keys (scope, key, request_hash, status, created_at)
                VALUES (\(scope), \(key), \(requestHash), 0, \(seconds))
                ON CONFLICT DO NOTHING RETURNING 1
                """,
                logger
            )
            if inserted == 1 { return .claimed }
            guard
                let row = try await connection.rows(
                    """
                    SELECT request_hash, status, content_type, location, body FROM idempotency_keys
                    WHERE scope = \(scope) AND key = \(key)
                    """,
                    logger
                ).first
            else { return .inProgress(requestHash: requestHash) }
            let hash = try row.at(0, as: String.self)
            let status = try row.at(1, as: Int.self)
            guard status != 0 else { return .inProgress(requestHash: hash) }
            let body = try row.at(4, as: ByteBuffer?.self)
            return .answered(
                requestHash: hash,
                response: IdempotentResponse(
                    status: status,
                    contentType: try row.at(2, as: String?.self),
                    location: try row.at(3, as: String?.self),
                    body: body.map { Array($0.readableBytesView) } ?? []
                )
            )
        }
    }

    public func completeIdempotencyKey(scope: String, key: String, response: IdempotentResponse) async throws {
        try await write { [self] connection in
            try await connection.run(
                """
                UPDATE idempotency_keys SET status = \(response.status), content_type = \(response.contentType),
                    location = \(response.location), body = \(ByteBuffer(bytes: response.body))
                WHERE scope = \(scope) AND key = \(key)
                """,
                logger
            )
        }
    }

    public func releaseIdempotencyKey(scope: String, key: String) async throws {
        try await write { [self] connection in
            try await connection.run(
                "DELETE FROM idempotency_keys WHERE scope = \(scope) AND key = \(key) AND status = 0",
                logger
            )
        }
    }
}
