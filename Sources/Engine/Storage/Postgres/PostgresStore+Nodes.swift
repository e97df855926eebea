import Foundation
import PostgresNIO

extension PostgresStore: NodeMembership {
    public var heartbeatInterval: Duration { configuration.heartbeatInterval }

    public func heartbeat(host: String, now: Date) async throws -> Heartbeat {
        let wall = now.unixSeconds
        let silentBefore = wall - configuration.nodeSilence.seconds
        return try await write { [self] connection in
            try await connection.run(
                """
                INSERT INTO nodes (id, host, started_at, last_seen_at) VALUES (\(nodeID), \(host), \(wall), \(wall))
                ON CONFLICT (id) DO UPDATE SET last_seen_at = GREATEST(nodes.last_seen_at, excluded.last_seen_at),
                    host = excluded.host
                """,
                logger
            )
            // Of nodes ending each other at once, the row locks let one in; the other finds nothing to end.
            let silent = try await connection.rows(
                """
                DELETE FROM nodes WHERE last_seen_at < \(silentBefore) AND id <> \(nodeID) RETURNING id
                """,
                logger
            ).map { try $0.at(0, as: String.self) }
            var ended: [EndedNode] = []
            for id in silent { ended.append(try await Self.release(id, connection: connection, logger: logger)) }
            let live = try await connection.rows("SELECT id, started_at FROM nodes", logger).map {
                "\(try $0.at(0, as: String.self))@\(try $0.at(1, as: Double.self))"
            }
            return Heartbeat(ended: ended, live: Set(live))
        }
    }

    /// Ends this node's claims and leases and its row: the other nodes' next heartbeat finds it gone and sweeps at
    /// once; this node's own next heartbeat records it again.
    public func handBackWork() async throws -> EndedNode? {
        try await endNode(nodeID)
    }

    public func endNode(_ id: String) async throws -> EndedNode {
        try await write { [self] connection in
            try await connection.run("DELETE FROM nodes WHERE id = \(id)", logger)
            return try await Self.release(id, connection: connection, logger: logger)
        }
    }

    public func probeWrite() async throws {
        try await read { [self] connection in try await connection.run("SELECT 1", logger) }
    }

    public func nodes() async throws -> [NodeRecord] {
        try await read { [self] connection in
            try await connection.rows(
                "SELECT id, host, started_at, last_seen_at FROM nodes ORDER BY started_at, id",
                logger
            ).map {
                NodeRecord(
                    id: try $0.at(0),
                    host: try $0.at(1),
                    startedAt: Date(unixSeconds: try $0.at(2)),
                    lastSeenAt: Date(unixSeconds: try $0.at(3))
                )
            }
        }
    }

    /// Frees a node's claimed due rows and leased deliveries for any node to take now.
    private static func release(_ id: String, connection: PostgresConnection, logger: Logger) async throws -> EndedNode
    {
        let claims = try await connection.run(
            """
            UPDATE schedules SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = \(id) RETURNING 1
            """,
            logger
        )
        let leases = try await connection.run(
            """
            UPDATE unsettled_deliveries SET leased_by = NULL, leased_until = NULL WHERE leased_by = \(id) RETURNING 1
            """,
            logger
        )
        return EndedNode(id: id, claims: claims, leases: leases)
    }
}
