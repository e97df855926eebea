import Foundation
import PostgresNIO

extension PostgresStore {
    /// The advisory lock that orders the change feed: taken by every transaction just before it appends to the
    /// feed and held until it commits, so that sequence numbers become visible in their order. Without it a
    /// transaction that took number 5 could commit after one that took 6, and a follower that had read 6 would
    /// never see 5.
    static let changeFeedLock: Int64 = 0x1_4B_2026_0022

    /// The channel `NOTIFY` wakes other nodes' change feed followers on.
    public static let changeChannel = "broker_changes"

    public func changes(after sequence: Int64, limit: Int) async throws -> [StoreChange] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT seq, tenant_id, kind, subject, origin FROM changes WHERE seq > \(sequence)
                ORDER BY seq LIMIT \(max(0, limit))
                """,
                logger
            ).compactMap { row in
                guard let subject = StoredForm.subject(kind: try row.at(2), value: try row.at(3)) else { return nil }
                return StoreChange(
                    sequence: try row.at(0),
                    tenant: TenantID(trusted: try row.at(1)),
                    subject: subject,
                    origin: try row.at(4)
                )
            }
        }
    }

    public func latestChangeSequence() async throws -> Int64 {
        try await read { [self] connection in
            try await connection.rows("SELECT COALESCE(MAX(seq), 0)::bigint FROM changes", logger).first?.at(0) ?? 0
        }
    }

    public func pruneChanges(before date: Date) async throws -> Int {
        try await write { [self] connection in
            try await connection.run("DELETE FROM changes WHERE at < \(date.unixSeconds) RETURNING 1", logger)
        }
    }

    /// Carries out a write's duties in the caller's transaction, last, in `StoreDuties`' order (as the SQLite store
    /// does): its webhook events, its audit entries, then its entries in the change feed, whose lock is then held
    /// only from there to the commit.
    func apply(_ duties: StoreDuties, _ connection: PostgresConnection) async throws {
        try await queueWebhookEvents(duties.events, connection)
        for entry in duties.audit { try await insertAudit(entry, connection) }
        try await logChanges(connection, duties.changes)
    }

    /// Appends to the change feed inside the caller's transaction (so the changes and their entries commit
    /// together) and notifies the other nodes when it commits.
    private func logChanges(
        _ connection: PostgresConnection,
        _ entries: [(tenant: TenantID, subject: StoreChange.Subject)]
    ) async throws {
        guard !entries.isEmpty else { return }
        let encoded = entries.map { StoredForm.encode($0.subject) }
        try await connection.run("SELECT pg_advisory_xact_lock(\(Self.changeFeedLock))", logger)
        try await connection.run(
            """
            INSERT INTO changes (tenant_id, kind, subject, origin, at)
            SELECT tenant, kind, subject, \(nodeID), \(Date().unixSeconds)
            FROM UNNEST(\(entries.map(\.tenant.rawValue)), \(encoded.map(\.kind)), \(encoded.map(\.value)))
                WITH ORDINALITY AS v(tenant, kind, subject, position)
            ORDER BY position
            """,
            logger
        )
        try await connection.run("SELECT pg_notify(\(Self.changeChannel), \(nodeID))", logger)
    }

    /// Waits for another node's `NOTIFY` on ``changeChannel`` (or `timeout`). The first wait starts the listener:
    /// one pooled connection that listens for as long as the store is open, reconnecting with a backoff.
    public func waitForChanges(upTo timeout: Duration) async {
        listener.withLock { task in
            guard task == nil else { return }
            task = Task { [weak self] in await self?.listen() }
        }
        await bell.wait(upTo: timeout)
    }

    private func listen() async {
        var pause = Duration.milliseconds(500)
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: Self.changeChannel) { notifications in
                        // Listening (again): a change may have come while no connection listened.
                        bell.ring()
                        pause = .milliseconds(500)
                        for try await notification in notifications where notification.payload != nodeID {
                            bell.ring()
                        }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.warning(
                    "cannot listen for other nodes' changes; polling until it works again",
                    metadata: ["store.error": "\(Self.describe(error))"]
                )
            }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, .seconds(30))
        }
    }
}
