import Foundation
import GRDB

extension SQLiteStore {
    // MARK: Queueing, inside the transactions that make the changes

    /// The (tenant, event) pairs some enabled endpoint subscribes to: one read of a small table per transaction,
    /// so a ledger write builds no event when nobody listens.
    func webhookSubscriptions(_ db: Database) throws -> WebhookSubscriptions {
        var subscriptions = WebhookSubscriptions()
        let rows = try Row.fetchCursor(
            db.cachedStatement(sql: "SELECT tenant_id, events FROM webhook_endpoints WHERE enabled = 1")
        )
        while let row = try rows.next() {
            subscriptions.add(tenant: TenantID(trusted: row[0]), events: WebhookEvent.parse(list: row[1]))
        }
        return subscriptions
    }

    /// Queues events for the endpoints of their tenants that subscribe to them, in the caller's transaction. A
    /// tenant's queue holds at most ``WebhookSubscriptions/queueLimit`` events; past it an event is not queued and
    /// counts as dropped for its endpoint.
    func queueWebhookEvents(_ records: [WebhookEventRecord], _ db: Database) throws {
        guard !records.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO webhook_outbox (tenant_id, endpoint_id, event, ordering_key, data, created_at,
                    next_attempt_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """
        )
        for (tenant, group) in Dictionary(grouping: records, by: \.tenant) {
            let endpoints = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, events FROM webhook_endpoints WHERE tenant_id = ? AND enabled = 1"),
                arguments: [tenant.rawValue]
            ).map { (id: $0[0] as String, events: WebhookEvent.parse(list: $0[1])) }
            guard !endpoints.isEmpty else { continue }
            var pending =
                try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT count(*) FROM webhook_outbox WHERE tenant_id = ?"),
                    arguments: [tenant.rawValue]
                ) ?? 0
            var dropped: [String: Int] = [:]
            for record in group {
                for endpoint in endpoints where endpoint.events.contains(record.event) {
                    guard pending < WebhookSubscriptions.queueLimit else {
                        dropped[endpoint.id, default: 0] += 1
                        continue
                    }
                    pending += 1
                    try insert.execute(arguments: [
                        tenant.rawValue, endpoint.id, record.event.rawValue, record.orderingKey, record.data,
                        record.at.unixSeconds, record.at.unixSeconds,
                    ])
                }
            }
            for (endpoint, count) in dropped {
                try db.execute(
                    sql: """
                        UPDATE webhook_endpoints SET dropped = dropped + ?, last_error = 'the queue was full' WHERE id = ?
                        """,
                    arguments: [count, endpoint]
                )
            }
        }
    }

    /// Usernames of users, for events that name them.
    func usernames(_ users: Set<Int64>, _ db: Database) throws -> [Int64: String] {
        var names: [Int64: String] = [:]
        for chunk in Array(users).chunked(into: 500) {
            let rows = try Row.fetchAll(
                db,
                sql:
                    "SELECT id, username FROM users WHERE id IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ",")))",
                arguments: StatementArguments(chunk)
            )
            for row in rows { names[row[0]] = row[1] }
        }
        return names
    }

    // MARK: The port

    public func webhookEndpoints(tenant: TenantID) async throws -> [WebhookEndpoint] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM webhook_endpoints WHERE tenant_id = ? ORDER BY created_at, id",
                arguments: [tenant.rawValue]
            ).map(Self.webhookEndpoint(from:))
        }
    }

    public func createWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO webhook_endpoints (id, tenant_id, url, events, secret, previous_secret,
                        previous_secret_expires_at, enabled, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    endpoint.id, endpoint.tenant.rawValue, endpoint.url, WebhookEvent.list(endpoint.events),
                    endpoint.secret, endpoint.previousSecret, endpoint.previousSecretExpiresAt?.unixSeconds,
                    endpoint.enabled, endpoint.createdAt.unixSeconds,
                ]
            )
            try self.apply(.audited(audit), db)
        }
    }

    public func updateWebhookEndpoint(_ endpoint: WebhookEndpoint, audit: AuditEntry) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE webhook_endpoints SET url = ?, events = ?, secret = ?, previous_secret = ?,
                        previous_secret_expires_at = ?, enabled = ?
                    WHERE id = ? AND tenant_id = ?
                    """,
                arguments: [
                    endpoint.url, WebhookEvent.list(endpoint.events), endpoint.secret, endpoint.previousSecret,
                    endpoint.previousSecretExpiresAt?.unixSeconds, endpoint.enabled, endpoint.id,
                    endpoint.tenant.rawValue,
                ]
            )
            guard db.changesCount == 1 else { return false }
            try self.apply(.audited(audit), db)
            return true
        }
    }

    public func deleteWebhookEndpoint(tenant: TenantID, id: String, audit: AuditEntry) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM webhook_outbox WHERE endpoint_id = ? AND tenant_id = ?",
                arguments: [id, tenant.rawValue]
            )
            try db.execute(
                sql: """
                    DELETE FROM webhook_attempts WHERE endpoint_id IN
                        (SELECT id FROM webhook_endpoints WHERE id = ? AND tenant_id = ?)
                    """,
                arguments: [id, tenant.rawValue]
            )
            try db.execute(
                sql: "DELETE FROM webhook_endpoints WHERE id = ? AND tenant_id = ?",
                arguments: [id, tenant.rawValue]
            )
            guard db.changesCount == 1 else { return false }
            try self.apply(.audited(audit), db)
            return true
        }
    }

    public func pendingWebhookEvents(tenant: TenantID) async throws -> [String: Int] {
        try await read { db in
            var pending: [String: Int] = [:]
            for row in try Row.fetchAll(
                db,
                sql: "SELECT endpoint_id, count(*) FROM webhook_outbox WHERE tenant_id = ? GROUP BY endpoint_id",
                arguments: [tenant.rawValue]
            ) {
                pending[row[0]] = row[1]
            }
            return pending
        }
    }

    public func webhookAttempts(tenant: TenantID, endpoint: String, limit: Int) async throws -> [WebhookAttempt] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT a.event_id, a.event, a.at, a.status, a.error, a.outcome, a.duration FROM webhook_attempts a
                    JOIN webhook_endpoints e ON e.id = a.endpoint_id AND e.tenant_id = ?
                    WHERE a.endpoint_id = ? ORDER BY a.id DESC LIMIT ?
                    """,
                arguments: [tenant.rawValue, endpoint, max(0, limit)]
            ).map {
                WebhookAttempt(
                    eventID: $0[0],
                    event: WebhookEvent(rawValue: $0[1]) ?? .deliveryPushed,
                    at: Date(unixSeconds: $0[2]),
                    status: $0[3],
                    error: $0[4],
                    outcome: $0[5],
                    durationSeconds: $0[6]
                )
            }
        }
    }

    public func dueWebhookEvents(
        now: Date,
        room: WebhookShares.Room,
        lease: Duration
    ) async throws -> [WebhookOutboxItem] {
        guard room.free > 0 else { return [] }
        let at = now.unixSeconds
        let excluded = Array(room.fullEndpoints)
        let busy = Array(room.tenantRoom)
        let tenantRoom =
            busy.isEmpty
            ? "?" : "CASE tenant_id " + busy.map { _ in "WHEN ? THEN ?" }.joined(separator: " ") + " ELSE ? END"
        var arguments: [any DatabaseValueConvertible] = [at, at] + excluded
        for (tenant, count) in busy { arguments += [tenant.rawValue, count] }
        arguments += [room.perTenant, room.free]
        let statementArguments = StatementArguments(arguments.map(\.databaseValue))
        // Looked for first without the writer (every half second while idle, beside a burst's commits), then
        // leased in a write that takes only those still free. Each tenant's oldest due first, up to its room.
        let found = try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, tenant_id, endpoint_id, event, ordering_key, data, created_at, attempts FROM (
                        SELECT o.id, o.tenant_id, o.endpoint_id, o.event, o.ordering_key, o.data, o.created_at,
                            o.attempts, o.next_attempt_at,
                            row_number() OVER (PARTITION BY o.tenant_id ORDER BY o.next_attempt_at, o.id) AS rank
                        FROM webhook_outbox o JOIN webhook_endpoints e ON e.id = o.endpoint_id AND e.enabled = 1
                        WHERE o.next_attempt_at <= ? AND o.leased_until <= ?
                            AND o.endpoint_id NOT IN (\(Array(repeating: "?", count: excluded.count).joined(separator: ",")))
                            AND o.id = (SELECT min(p.id) FROM webhook_outbox p
                                WHERE p.endpoint_id = o.endpoint_id AND p.ordering_key = o.ordering_key)
                    ) WHERE rank <= \(tenantRoom)
                    ORDER BY next_attempt_at, id LIMIT ?
                    """,
                arguments: statementArguments
            ).map(Self.outboxItem(from:))
        }
        guard !found.isEmpty else { return [] }
        return try await write { db in
            let leaseRow = try db.cachedStatement(
                sql: "UPDATE webhook_outbox SET leased_until = ? WHERE id = ? AND leased_until <= ?"
            )
            return try found.filter { item in
                try leaseRow.execute(arguments: [at + lease.seconds, item.id, at])
                return db.changesCount == 1
            }
        }
    }

    public func recordWebhookAttempt(
        _ item: WebhookOutboxItem,
        result: WebhookAttemptResult,
        at: Date,
        duration: Double
    ) async throws {
        try await write { db in
            let attempt = WebhookAttemptRow(item, result, at: at, duration: duration)
            switch result {
            case .delivered, .dropped:
                try db.execute(sql: "DELETE FROM webhook_outbox WHERE id = ?", arguments: [item.id])
            case .retry(let next, _, _):
                try db.execute(
                    sql:
                        "UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, leased_until = 0 WHERE id = ?",
                    arguments: [next.unixSeconds, item.id]
                )
            }
            try db.execute(
                sql: """
                    UPDATE webhook_endpoints SET delivered = delivered + ?, dropped = dropped + ?, last_attempt_at = ?,
                        last_status = ?, last_error = ?
                    WHERE id = ?
                    """,
                arguments: [
                    attempt.delivered, attempt.dropped, at.unixSeconds, attempt.status, attempt.error, item.endpoint,
                ]
            )
            try db.execute(
                sql: """
                    INSERT INTO webhook_attempts (endpoint_id, event_id, event, at, status, error, outcome, duration)
                    SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = ?)
                    """,
                arguments: [
                    item.endpoint, item.id, item.event.rawValue, at.unixSeconds, attempt.status, attempt.error,
                    attempt.outcome, duration, item.endpoint,
                ]
            )
            // The latest attempts only.
            try db.execute(
                sql: """
                    DELETE FROM webhook_attempts WHERE endpoint_id = ? AND id <= (SELECT id FROM webhook_attempts
                        WHERE endpoint_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)
                    """,
                arguments: [item.endpoint, item.endpoint, WebhookSubscriptions.attemptsKept]
            )
        }
    }

    static func webhookEndpoint(from row: Row) -> WebhookEndpoint {
        var endpoint = WebhookEndpoint(
            id: row["id"],
            tenant: TenantID(trusted: row["tenant_id"]),
            url: row["url"],
            events: WebhookEvent.parse(list: row["events"]),
            secret: row["secret"],
            enabled: row["enabled"],
            createdAt: Date(unixSeconds: row["created_at"])
        )
        endpoint.previousSecret = row["previous_secret"]
        endpoint.previousSecretExpiresAt = (row["previous_secret_expires_at"] as Double?).map(Date.init(unixSeconds:))
        endpoint.delivered = row["delivered"]
        endpoint.dropped = row["dropped"]
        endpoint.lastAttemptAt = (row["last_attempt_at"] as Double?).map(Date.init(unixSeconds:))
        endpoint.lastStatus = row["last_status"]
        endpoint.lastError = row["last_error"]
        return endpoint
    }

    static func outboxItem(from row: Row) -> WebhookOutboxItem {
        WebhookOutboxItem(
            id: row[0],
            tenant: TenantID(trusted: row[1]),
            endpoint: row[2],
            event: WebhookEvent(rawValue: row[3]) ?? .deliveryPushed,
            orderingKey: row[4],
            data: row[5],
            createdAt: Date(unixSeconds: row[6]),
            attempts: row[7]
        )
    }
}

/// What one attempt writes to its endpoint's row and to the attempts kept.
struct WebhookAttemptRow {
    var delivered = 0
    var dropped = 0
    var status: Int?
    var error: String?
    var outcome: String

    init(_ item: WebhookOutboxItem, _ result: WebhookAttemptResult, at: Date, duration: Double) {
        switch result {
        case .delivered(let status):
            (delivered, self.status, outcome) = (1, status, "delivered")
        case .retry(_, let status, let error):
            (self.status, self.error, outcome) = (status, error, "retry")
        case .dropped(let status, let error):
            (dropped, self.status, self.error, outcome) = (1, status, error, "dropped")
        }
    }
}

/// The (tenant, event) pairs enabled endpoints subscribe to, read once per ledger transaction.
struct WebhookSubscriptions: Sendable {
    /// Events a tenant's queue holds at most.
    static let queueLimit = 100_000
    /// Attempts kept per endpoint.
    static let attemptsKept = 100

    private var pairs = Set<String>()

    mutating func add(tenant: TenantID, events: Set<WebhookEvent>) {
        for event in events { pairs.insert(tenant.rawValue + " " + event.rawValue) }
    }

    var isEmpty: Bool { pairs.isEmpty }

    func contains(_ tenant: TenantID, _ event: WebhookEvent) -> Bool {
        !pairs.isEmpty && pairs.contains(tenant.rawValue + " " + event.rawValue)
    }
}

extension Array {
    func chunked(into size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min(count, $0 + size)] }
    }
}
