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

    /// Appends to the change feed inside the caller's transaction, so the change and its entry commit together.
    func logChange(_ db: Database, tenant: TenantID, subject: StoreChange.Subject) throws {
        let (kind, value): (String, String) =
            switch subject {
            case .credentials(let username): ("credentials", username)
            case .ledger(let user): ("ledger", user.description)
            case .ledgers(let users): ("ledgers", users.map(\.description).joined(separator: ","))
            case .catalog: ("catalog", "")
            case .profile(let user): ("profile", user.description)
            }
        // Cached: a burst logs one change per delivery, and parsing the statement each time cost more than the insert.
        try db.cachedStatement(sql: "INSERT INTO changes (tenant_id, kind, subject, origin, at) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [tenant.rawValue, kind, value, nodeID, Date().unixSeconds])
    }

    /// One change entry per tenant for the users whose deliveries were recorded in this transaction.
    func logLedgerChanges(_ db: Database, _ deliveries: [Delivery]) throws {
        var users: [TenantID: [UserID]] = [:]
        var seen = Set<UserID>()
        for delivery in deliveries where seen.insert(delivery.user).inserted {
            users[delivery.tenant, default: []].append(delivery.user)
        }
        for (tenant, users) in users.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            try logChange(db, tenant: tenant, subject: users.count == 1 ? .ledger(users[0]) : .ledgers(users))
        }
    }

    static func change(from row: Row) -> StoreChange? {
        let kind: String = row["kind"]
        let value: String = row["subject"]
        let subject: StoreChange.Subject
        switch kind {
        case "credentials": subject = .credentials(username: value)
        case "ledger": subject = .ledger(UserID(Int64(value) ?? 0))
        case "ledgers": subject = .ledgers(value.split(separator: ",").compactMap { Int64($0).map(UserID.init) })
        case "catalog": subject = .catalog
        case "profile": subject = .profile(UserID(Int64(value) ?? 0))
        default: return nil
        }
        return StoreChange(
            sequence: row["seq"],
            tenant: TenantID(trusted: row["tenant_id"]),
            subject: subject,
            origin: row["origin"]
        )
    }
}
