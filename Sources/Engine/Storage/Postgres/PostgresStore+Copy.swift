import Foundation
import GRDB
import PostgresNIO

/// What `broker store copy` moved, table by table, as counted in the source and in the target afterwards.
public struct StoreCopyReport: Sendable, Equatable {
    public struct Table: Sendable, Equatable {
        public var name: String
        public var source: Int
        public var target: Int
    }

    public var tables: [Table]
}

extension PostgresStore {
    /// How a column of the SQLite schema is bound for PostgreSQL.
    enum ColumnKind { case text, integer, real, boolean }

    static let credentialColumns: [(String, ColumnKind)] = [
        ("id", .text), ("tenant_id", .text), ("kind", .text), ("team_id", .text), ("key_id", .text),
        ("topics", .text), ("not_after", .real), ("fingerprint", .text), ("sealed", .text), ("state", .text),
        ("created_at", .real), ("activated_at", .real), ("last_error", .text),
    ]

    /// The tables an embedded deployment moves, parents first, with their columns. The change feed is not moved:
    /// it only tells running nodes what to drop from their caches.
    static let copiedTables: [(name: String, columns: [(String, ColumnKind)])] = [
        (
            "tenants",
            [
                ("id", .text), ("name", .text), ("default_language", .text), ("default_time_zone", .text),
                ("default_delivery_minute", .integer), ("max_pushes_per_day", .integer), ("apns_topic", .text),
                ("created_at", .real), ("push_expiry", .text), ("suspended", .boolean),
                ("default_quiet_start", .integer), ("default_quiet_end", .integer), ("weekdays", .integer),
                ("apns_environment", .text), ("admins_manage_apns", .boolean), ("first_delivery", .text),
                ("learned_timing", .text),
            ]
        ),
        ("apns_credentials", credentialColumns),
        ("fcm_credentials", credentialColumns),
        ("operators", [("name", .text), ("password_hash", .text), ("created_at", .real)]),
        (
            "users",
            [
                ("id", .integer), ("tenant_id", .text), ("username", .text), ("password_hash", .text),
                ("language", .text), ("life_areas", .text), ("enabled", .boolean), ("time_zone", .text),
                ("delivery_minute", .integer), ("quiet_start", .integer), ("quiet_end", .integer),
                ("weekdays", .integer), ("created_at", .real), ("is_admin", .boolean),
            ]
        ),
        (
            "impulses",
            [
                ("tenant_id", .text), ("id", .text), ("language", .text), ("title", .text),
                ("description_short", .text), ("description", .text), ("duration_minutes", .integer),
                ("action", .text), ("single", .boolean), ("image_urls", .text), ("video_url", .text),
                ("web_url", .text), ("life_area", .text), ("series", .text), ("series_position", .integer),
                ("retired", .boolean),
            ]
        ),
        (
            "devices",
            [
                ("tenant_id", .text), ("topic", .text), ("token", .text), ("user_id", .integer), ("name", .text),
                ("environment", .text), ("registered_at", .real), ("quarantined_at", .real), ("removed_at", .real),
                ("channel", .text),
            ]
        ),
        (
            "deliveries",
            [
                ("id", .integer), ("tenant_id", .text), ("user_id", .integer), ("impulse_id", .text),
                ("kind", .text), ("local_date", .text), ("assigned_at", .real), ("pushed_at", .real),
                ("apns_id", .text), ("fetched_at", .real), ("read_at", .real), ("settled_at", .real),
                ("report_day", .text), ("pushed_channels", .integer), ("pushed_devices", .text),
            ]
        ),
        (
            "engagement_days",
            [
                ("tenant_id", .text), ("day", .text), ("impulse_id", .text), ("assigned", .integer),
                ("pushed", .integer), ("no_device", .integer), ("failed", .integer), ("fetched", .integer),
                ("read", .integer),
            ]
        ),
        (
            "engagement_read_latency",
            [("tenant_id", .text), ("day", .text), ("impulse_id", .text), ("bucket", .integer), ("reads", .integer)]
        ),
        (
            "engagement_channels",
            [
                ("tenant_id", .text), ("day", .text), ("impulse_id", .text), ("channel", .text), ("pushed", .integer),
                ("read", .integer),
            ]
        ),
        (
            "dispatch_days",
            [
                ("tenant_id", .text), ("day", .text), ("due", .integer), ("skipped_stale", .integer),
                ("skipped_weekday", .integer), ("deferred_quiet_hours", .integer),
            ]
        ),
        (
            "schedules",
            [
                ("user_id", .integer), ("tenant_id", .text), ("fire_at", .real), ("local_date", .text),
                ("last_date", .text), ("not_before", .real),
            ]
        ),
        (
            "user_timing",
            [
                ("user_id", .integer), ("tenant_id", .text), ("opted_in", .boolean), ("evidence", .text),
                ("folded_through", .text), ("previous_weekday", .integer), ("previous_weekend", .integer),
                ("planned_date", .text), ("planned_minute", .integer), ("planned_reason", .text),
                ("version", .integer),
            ]
        ),
        (
            "timing_population",
            [("tenant_id", .text), ("kind", .integer), ("slot", .integer), ("reads", .real), ("misses", .real)]
        ),
        (
            "timing_outcomes",
            [("tenant_id", .text), ("day", .text), ("arm", .integer), ("bucket", .integer), ("deliveries", .integer)]
        ),
        (
            "timing_user_weeks",
            [
                ("tenant_id", .text), ("user_id", .integer), ("week", .text), ("arm", .integer),
                ("deliveries", .integer), ("within_hour", .integer), ("read", .integer),
            ]
        ),
        (
            "reminders",
            [
                ("id", .integer), ("tenant_id", .text), ("user_id", .integer), ("impulse_id", .text),
                ("fire_at", .real), ("created_at", .real),
            ]
        ),
        (
            "webhook_endpoints",
            [
                ("id", .text), ("tenant_id", .text), ("url", .text), ("events", .text), ("secret", .text),
                ("previous_secret", .text), ("previous_secret_expires_at", .real), ("enabled", .boolean),
                ("created_at", .real), ("delivered", .integer), ("dropped", .integer), ("last_attempt_at", .real),
                ("last_status", .integer), ("last_error", .text),
            ]
        ),
        (
            "webhook_outbox",
            [
                ("id", .integer), ("tenant_id", .text), ("endpoint_id", .text), ("event", .text),
                ("ordering_key", .text), ("data", .text), ("created_at", .real), ("attempts", .integer),
                ("next_attempt_at", .real), ("leased_until", .real),
            ]
        ),
        (
            "audit",
            [
                ("id", .integer), ("at", .real), ("actor", .text), ("role", .text), ("tenant_id", .text),
                ("action", .text), ("target", .text), ("request_id", .text),
            ]
        ),
    ]

    /// Rows per INSERT: PostgreSQL takes at most 65,535 parameters per statement.
    static let copyRowsPerStatement = 2000

    /// Whether the database holds any tenant, user or delivery.
    public func isEmpty() async throws -> Bool {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT NOT (EXISTS (SELECT 1 FROM tenants) OR EXISTS (SELECT 1 FROM users)
                    OR EXISTS (SELECT 1 FROM deliveries))
                """,
                logger
            ).first?.at(0, as: Bool.self) ?? false
        }
    }

    /// Copies an embedded deployment's SQLite file into this database in one transaction, keeping every id (a
    /// delivery's id is in its collapse id and apns-id), and checks the counts. `replace` empties the database
    /// first; without it a database that holds data is refused. Nothing is written unless everything is.
    public func copy(fromSQLite source: SQLiteStore, replace: Bool) async throws -> StoreCopyReport {
        if !replace, try await !isEmpty() {
            throw EngineError(.conflict, "the target database is not empty (use --replace to empty it first)")
        }
        // One transaction for everything: a million users take minutes, hence an hour's deadline.
        return try await write(deadline: .seconds(3600)) { [self] connection in
            if replace {
                try await connection.run(
                    "TRUNCATE \(unescaped: Self.copiedTables.map(\.name).joined(separator: ", ")), changes, unsettled_deliveries, webhook_attempts",
                    logger
                )
            }
            var report = StoreCopyReport(tables: [])
            for table in Self.copiedTables {
                let copied = try await self.copy(table: table, from: source, into: connection)
                let counted =
                    try await connection.rows("SELECT count(*) FROM \(unescaped: table.name)", logger).first?.at(
                        0,
                        as: Int.self
                    ) ?? -1
                report.tables.append(.init(name: table.name, source: copied, target: counted))
                guard counted == copied else {
                    throw EngineError(
                        .storage,
                        "\(table.name): \(copied) rows read from SQLite but \(counted) in PostgreSQL; nothing was copied"
                    )
                }
            }
            // Deliveries without an outcome are pushed by the first node's sweep, as after a restart.
            try await connection.run(
                """
                INSERT INTO unsettled_deliveries (delivery_id, assigned_at)
                SELECT id, assigned_at FROM deliveries WHERE settled_at IS NULL
                """,
                logger
            )
            for table in ["users", "deliveries", "reminders", "audit", "webhook_outbox"] {
                try await connection.run(
                    """
                    SELECT setval(pg_get_serial_sequence(\(table), 'id'),
                        COALESCE((SELECT MAX(id) FROM \(unescaped: table)), 0) + 1, false)
                    """,
                    logger
                )
            }
            return report
        }
    }

    /// Copies one table in pages; returns how many rows it read.
    private func copy(
        table: (name: String, columns: [(String, ColumnKind)]),
        from source: SQLiteStore,
        into connection: PostgresConnection
    ) async throws -> Int {
        let names = table.columns.map(\.0).joined(separator: ", ")
        var copied = 0
        var last = Int64.min
        while true {
            // Pages by rowid (every table of the SQLite store has one): each page is an index range, however far
            // into a million rows it is.
            let after = last
            let page = try await source.read { db in
                try Row.fetchAll(
                    db,
                    sql: "SELECT rowid, \(names) FROM \(table.name) WHERE rowid > ? ORDER BY rowid LIMIT ?",
                    arguments: [after, Self.copyRowsPerStatement]
                ).map { Array($0.databaseValues) }
            }
            guard let tail = page.last else { return copied }
            if case .int64(let rowid) = tail[0].storage { last = rowid }
            var bindings = PostgresBindings(capacity: page.count * table.columns.count)
            var tuples: [String] = []
            tuples.reserveCapacity(page.count)
            for row in page {
                var placeholders: [String] = []
                for (value, (_, kind)) in zip(row.dropFirst(), table.columns) {
                    try Self.bind(value, as: kind, into: &bindings)
                    placeholders.append("$\(bindings.count)")
                }
                tuples.append("(" + placeholders.joined(separator: ",") + ")")
            }
            try await connection.run(
                PostgresQuery(
                    unsafeSQL: "INSERT INTO \(table.name) (\(names)) VALUES " + tuples.joined(separator: ","),
                    binds: bindings
                ),
                logger
            )
            copied += page.count
        }
    }

    private static func bind(_ value: DatabaseValue, as kind: ColumnKind, into bindings: inout PostgresBindings) throws
    {
        switch (value.storage, kind) {
        case (.null, _): bindings.appendNull()
        case (.int64(let number), .integer): bindings.append(number)
        case (.int64(let number), .real): bindings.append(Double(number))
        case (.int64(let number), .boolean): bindings.append(number != 0)
        case (.double(let number), .real): bindings.append(number)
        case (.string(let text), .text): bindings.append(text)
        default:
            throw EngineError(.invalidInput, "a value of the SQLite file does not fit its column: \(value.storage)")
        }
    }
}
