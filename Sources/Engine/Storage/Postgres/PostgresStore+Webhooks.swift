import Foundation
import PostgresNIO

extension PostgresStore {
    // MARK: Queueing, inside the transactions that make the changes

    /// The (tenant, event) pairs some enabled endpoint subscribes to (see the SQLite store's).
    func webhookSubscriptions(_ connection: PostgresConnection) async throws -> WebhookSubscriptions {
        var subscriptions = WebhookSubscriptions()
        for row in try await connection.rows("SELECT tenant_id, events FROM webhook_endpoints WHERE enabled", logger) {
            subscriptions.add(tenant: TenantID(trusted: try row.at(0)), events: WebhookEvent.parse(list: try row.at(1)))
        }
        return subscriptions
    }

    /// Queues events for the endpoints of their tenants that subscribe to them, in the caller's transaction, as the
    /// SQLite store does. The tenant's endpoint rows are locked first, so two nodes' counts of its queue do not
    /// both let it grow past the limit.
    func queueWebhookEvents(_ records: [WebhookEventRecord], _ connection: PostgresConnection) async throws {
        guard !records.isEmpty else { return }
        for (tenant, group) in Dictionary(grouping: records, by: \.tenant).sorted(by: { $0.key < $1.key }) {
            let endpoints = try await connection.rows(
                """
                SELECT id, events FROM webhook_endpoints WHERE tenant_id = \(tenant.rawValue) AND enabled
                ORDER BY id FOR UPDATE
                """,
                logger
            ).map { (id: try $0.at(0, as: String.self), events: WebhookEvent.parse(list: try $0.at(1))) }
            guard !endpoints.isEmpty else { continue }
            var pending =
                try await connection.rows(
                    "SELECT count(*) FROM webhook_outbox WHERE tenant_id = \(tenant.rawValue)",
                    logger
                ).first?.at(0, as: Int.self) ?? 0
            var dropped: [String: Int] = [:]
            var rows: (endpoints: [String], events: [String], keys: [String], data: [String], at: [Double]) =
                ([], [], [], [], [])
            for record in group {
                for endpoint in endpoints where endpoint.events.contains(record.event) {
                    guard pending < WebhookSubscriptions.queueLimit else {
                        dropped[endpoint.id, default: 0] += 1
                        continue
                    }
                    pending += 1
                    rows.endpoints.append(endpoint.id)
                    rows.events.append(record.event.rawValue)
                    rows.keys.append(record.orderingKey)
                    rows.data.append(record.data)
                    rows.at.append(record.at.unixSeconds)
                }
            }
            if !rows.endpoints.isEmpty {
                try await connection.run(
                    """
                    INSERT INTO webhook_outbox (tenant_id, endpoint_id, event, ordering_key, data, created_at,
                        next_attempt_at)
                    SELECT \(tenant.rawValue), v.endpoint, v.event, v.key, v.data, v.at, v.at
                    FROM UNNEST(\(rows.endpoints), \(rows.events), \(rows.keys), \(rows.data), \(rows.at))
                        WITH ORDINALITY AS v(endpoint, event, key, data, at, position)
                    ORDER BY v.position
                    """,
                    logger
                )
            }
            for (endpoint, count) in dropped.sorted(by: { $0.key < $1.key }) {
                try await connection.run(
                    """
                    UPDATE webhook_endpoints SET dropped = dropped + \(count), last_error = 'the queue was full'
                    WHERE id = \(endpoint)
                    """,
                    logger
                )
            }
        }
    }

    /// Usernames of users, for events that name them.
    func usernames(_ users: Set<Int64>, _ connection: PostgresConnection) async throws -> [Int64: String] {
        var names: [Int64: String] = [:]
        for row in try await connection.rows(
            "SELECT id, username FROM users WHERE id = ANY(\(Array(users)))",
            logger
        ) {
            names[try row.at(0, as: Int64.self)] = try row.at(1, as: String.self)
        }
        return names
    }

    // MARK: The port

    static let webhookEndpointColumns = """
        id, tenant_id, url, events, secret, previous_secret, previous_secret_expires_at, enabled, created_at,
        delivered, dropped, last_attempt_at, last_status, last_error
        """

    public func webhookEndpoints(tenant: TenantID) async throws -> [WebhookEndpoint] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.webhookEndpointColumns) FROM webhook_endpoints
                WHERE tenant_id = \(tenant.rawValue) ORDER BY created_at, id
                """,
                logger
            ).map(Self.webhookEndpoint(from:))
        }
    }

    public func createWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws {
        try await write { [self] connection in
            try await connection.run(
                """
                INSERT INTO webhook_endpoints (id, tenant_id, url, events, secret, previous_secret,
                    previous_secret_expires_at, enabled, created_at)
                VALUES (\(endpoint.id), \(endpoint.tenant.rawValue), \(endpoint.url),
                    \(WebhookEvent.list(endpoint.events)), \(endpoint.secret), \(endpoint.previousSecret),
                    \(endpoint.previousSecretExpiresAt?.unixSeconds), \(endpoint.enabled),
                    \(endpoint.createdAt.unixSeconds))
                """,
                logger
            )
            try await self.apply(.audited(audit), connection)
        }
    }

    public func updateWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws -> Bool {
        try await write { [self] connection in
            let changed = try await connection.run(
                """
                UPDATE webhook_endpoints SET url = \(endpoint.url), events = \(WebhookEvent.list(endpoint.events)),
                    secret = \(endpoint.secret), previous_secret = \(endpoint.previousSecret),
                    previous_secret_expires_at = \(endpoint.previousSecretExpiresAt?.unixSeconds),
                    enabled = \(endpoint.enabled)
                WHERE id = \(endpoint.id) AND tenant_id = \(endpoint.tenant.rawValue)
                RETURNING 1
                """,
                logger
            )
            guard changed == 1 else { return false }
            try await self.apply(.audited(audit), connection)
            return true
        }
    }

    public func deleteWebhookEndpoint(tenant: TenantID, id: String, audit: AuditEntry) async throws -> Bool {
        try await write { [self] connection in
            // The outbox and attempts rows go with it (ON DELETE CASCADE).
            let deleted = try await connection.run(
                "DELETE FROM webhook_endpoints WHERE id = \(id) AND tenant_id = \(tenant.rawValue) RETURNING 1",
                logger
            )
            guard deleted == 1 else { return false }
            try await self.apply(.audited(audit), connection)
            return true
        }
    }

    public func pendingWebhookEvents(tenant: TenantID) async throws -> [String: Int] {
        try await read { [self] connection in
            var pending: [String: Int] = [:]
            for row in try await connection.rows(
                """
                SELECT endpoint_id, count(*) FROM webhook_outbox WHERE tenant_id = \(tenant.rawValue)
                GROUP BY endpoint_id
                """,
                logger
            ) {
                pending[try row.at(0, as: String.self)] = try row.at(1, as: Int.self)
            }
            return pending
        }
    }

    public func webhookAttempts(tenant: TenantID, endpoint: String, limit: Int) async throws -> [WebhookAttempt] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT a.event_id, a.event, a.at, a.status, a.error, a.outcome, a.duration FROM webhook_attempts a
                JOIN webhook_endpoints e ON e.id = a.endpoint_id AND e.tenant_id = \(tenant.rawValue)
                WHERE a.endpoint_id = \(endpoint) ORDER BY a.id DESC LIMIT \(max(0, limit))
                """,
                logger
            ).map { row in
                WebhookAttempt(
                    eventID: try row.at(0),
                    event: WebhookEvent(rawValue: try row.at(1)) ?? .deliveryPushed,
                    at: Date(unixSeconds: try row.at(2)),
                    status: try row.at(3),
                    error: try row.at(4),
                    outcome: try row.at(5),
                    durationSeconds: try row.at(6)
                )
            }
        }
    }

    /// Leases the head of each (endpoint, ordering key) line that is due and not leased by another node.
    public func dueWebhookEvents(
        now: Date,
        room: WebhookShares.Room,
        lease: Duration
    ) async throws -> [WebhookOutboxItem] {
        guard room.free > 0 else { return [] }
        let busyTenants = room.tenantRoom.keys.map(\.rawValue)
        let busyRoom = busyTenants.map { room.tenantRoom[TenantID(trusted: $0)] ?? 0 }
        return try await write { [self] connection in
            let at = now.unixSeconds
            // Each tenant's oldest due first, up to its room; rows are locked (and the lease checked again) only
            // at the outer level (FOR UPDATE does not go with window functions).
            return try await connection.rows(
                """
                WITH ranked AS (
                    SELECT o.id, o.next_attempt_at,
                        row_number() OVER (PARTITION BY o.tenant_id ORDER BY o.next_attempt_at, o.id) AS rank,
                        COALESCE(
                            (SELECT b.room FROM unnest(\(busyTenants)::text[], \(busyRoom)::bigint[]) AS b(tenant, room)
                                WHERE b.tenant = o.tenant_id),
                            \(room.perTenant)
                        ) AS room
                    FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id AND e.enabled
                    WHERE o.next_attempt_at <= \(at) AND o.leased_until <= \(at)
                        AND NOT (o.endpoint_id = ANY(\(Array(room.fullEndpoints))))
                        AND o.id = (SELECT min(p.id) FROM webhook_outbox p
                            WHERE p.endpoint_id = o.endpoint_id AND p.ordering_key = o.ordering_key)
                ), due AS (
                    SELECT w.id FROM webhook_outbox w JOIN ranked r ON r.id = w.id
                    WHERE r.rank <= r.room AND w.leased_until <= \(at)
                    ORDER BY r.next_attempt_at, r.id LIMIT \(room.free)
                    FOR UPDATE OF w SKIP LOCKED
                )
                UPDATE webhook_outbox w SET leased_until = \(at + lease.seconds) FROM due WHERE w.id = due.id
                RETURNING w.id, w.tenant_id, w.endpoint_id, w.event, w.ordering_key, w.data, w.created_at, w.attempts
                """,
                logger
            ).map { row in
                WebhookOutboxItem(
                    id: try row.at(0),
                    tenant: TenantID(trusted: try row.at(1)),
                    endpoint: try row.at(2),
                    event: WebhookEvent(rawValue: try row.at(3)) ?? .deliveryPushed,
                    orderingKey: try row.at(4),
                    data: try row.at(5),
                    createdAt: Date(unixSeconds: try row.at(6)),
                    attempts: try row.at(7)
                )
            }.sorted { $0.id < $1.id }
        }
    }

    public func recordWebhookAttempt(
        _ item: WebhookOutboxItem,
        result: WebhookAttemptResult,
        at: Date,
        duration: Double
    ) async throws {
        try await write { [self] connection in
            let attempt = WebhookAttemptRow(item, result, at: at, duration: duration)
            switch result {
            case .delivered, .dropped:
                try await connection.run("DELETE FROM webhook_outbox WHERE id = \(item.id)", logger)
            case .retry(let next, _, _):
                try await connection.run(
                    """
                    UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = \(next.unixSeconds),
                        leased_until = 0
                    WHERE id = \(item.id)
                    """,
                    logger
                )
            }
            let exists = try await connection.run(
                """
                UPDATE webhook_endpoints SET delivered = delivered + \(attempt.delivered),
                    dropped = dropped + \(attempt.dropped), last_attempt_at = \(at.unixSeconds),
                    last_status = \(attempt.status), last_error = \(attempt.error)
                WHERE id = \(item.endpoint) RETURNING 1
                """,
                logger
            )
            guard exists == 1 else { return }
            try await connection.run(
                """
                INSERT INTO webhook_attempts (endpoint_id, event_id, event, at, status, error, outcome, duration)
                VALUES (\(item.endpoint), \(item.id), \(item.event.rawValue), \(at.unixSeconds), \(attempt.status),
                    \(attempt.error), \(attempt.outcome), \(duration))
                """,
                logger
            )
            try await connection.run(
                """
                DELETE FROM webhook_attempts WHERE endpoint_id = \(item.endpoint) AND id <= (
                    SELECT id FROM webhook_attempts WHERE endpoint_id = \(item.endpoint)
                    ORDER BY id DESC LIMIT 1 OFFSET \(WebhookSubscriptions.attemptsKept))
                """,
                logger
            )
        }
    }

    static func webhookEndpoint(from row: PostgresRandomAccessRow) throws -> WebhookEndpoint {
        var endpoint = WebhookEndpoint(
            id: try row.at(0),
            tenant: TenantID(trusted: try row.at(1)),
            url: try row.at(2),
            events: WebhookEvent.parse(list: try row.at(3)),
            secret: try row.at(4),
            enabled: try row.at(7),
            createdAt: Date(unixSeconds: try row.at(8))
        )
        endpoint.previousSecret = try row.at(5)
        endpoint.previousSecretExpiresAt = (try row.at(6, as: Double?.self)).map(Date.init(unixSeconds:))
        endpoint.delivered = try row.at(9)
        endpoint.dropped = try row.at(10)
        endpoint.lastAttemptAt = (try row.at(11, as: Double?.self)).map(Date.init(unixSeconds:))
        endpoint.lastStatus = try row.at(12)
        endpoint.lastError = try row.at(13)
        return endpoint
    }
}
