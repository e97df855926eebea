import Foundation
import GRDB

extension SQLiteStore {
    public func changes(after sequence: Int64, limit: Int) async throws -> [StoreChange] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
                arguments: [sequence, limit]
            ).compactMap(Self.change(from:))
        }
    }

    public func latestChangeSequence() async throws -> Int64 {
        try await read { db in try Int64.fetchOne(db, sql: "SELECT MAX(seq) FROM changes") ?? 0 }
    }

    public func pruneChanges(before date: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM changes WHERE at < ?", arguments: [date.unixSeconds])
            return db.changesCount
        }
    }

    /// Carries out a write's duties in the caller's transaction, last, in `StoreDuties`' order: its webhook events,
    /// its audit entries, then its entries in the change feed.
    func apply(_ duties: StoreDuties, _ db: Database) throws {
        try queueWebhookEvents(duties.events, db)
        for entry in duties.audit { try Self.insertAudit(entry, db) }
        for change in duties.changes { try logChange(db, tenant: change.tenant, subject: change.subject) }
    }

    /// Appends to the change feed inside the caller's transaction, so the change and its entry commit together.
    private func logChange(_ db: Database, tenant: TenantID, subject: StoreChange.Subject) throws {
        let (kind, value) = StoredForm.encode(subject)
        // Cached: a burst logs one change per delivery, and parsing the statement each time cost more than the insert.
        try db.cachedStatement(sql: "INSERT INTO changes (tenant_id, kind, subject, origin, at) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [tenant.rawValue, kind, value, nodeID, Date().unixSeconds])
    }

    static func change(from row: Row) -> StoreChange? {
        guard let subject = StoredForm.subject(kind: row["kind"], value: row["subject"]) else { return nil }
        return StoreChange(
            sequence: row["seq"],
            tenant: TenantID(trusted: row["tenant_id"]),
            subject: subject,
            origin: row["origin"]
        )
    }
}
