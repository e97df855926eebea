import Foundation
import GRDB

extension SQLiteStore {
    public func apnsCredentials(tenant: TenantID?) async throws -> [StoredAPNsCredential] {
        try await read { db in
            let rows =
                if let tenant {
                    try Row.fetchAll(
                        db,
                        sql: "SELECT * FROM apns_credentials WHERE tenant_id = ? ORDER BY created_at, id",
                        arguments: [tenant.rawValue]
                    )
                } else {
                    try Row.fetchAll(db, sql: "SELECT * FROM apns_credentials ORDER BY created_at, id")
                }
            return rows.map(Self.apnsCredential(from:))
        }
    }

    public func addAPNsCredential(_ credential: StoredAPNsCredential, audit: AuditEntry) async throws {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM apns_credentials WHERE tenant_id = ? AND state = 'pending'",
                arguments: [credential.tenant.rawValue]
            )
            try db.execute(
                sql: """
                    INSERT INTO apns_credentials (id, tenant_id, kind, team_id, key_id, topics, not_after, fingerprint,
                        sealed, state, created_at, activated_at, last_error)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    credential.id, credential.tenant.rawValue, credential.kind.rawValue, credential.teamID,
                    credential.keyID, StoredForm.topics(credential.topics), credential.notAfter?.unixSeconds,
                    credential.fingerprint, credential.sealed, credential.state.rawValue,
                    credential.createdAt.unixSeconds, credential.activatedAt?.unixSeconds, credential.lastError,
                ]
            )
            try self.apply(.apnsCredentialsChanged(credential.tenant, audit: audit), db)
        }
    }

    public func settleAPNsCredential(
        tenant: TenantID,
        id: String,
        proven: Bool,
        reason: String?,
        at date: Date
    ) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE apns_credentials SET state = ?, activated_at = ?, last_error = ?
                    WHERE tenant_id = ? AND id = ? AND state = 'pending'
                    """,
                arguments: [
                    proven ? "active" : "failed", proven ? date.unixSeconds : nil, reason, tenant.rawValue, id,
                ]
            )
            guard db.changesCount == 1 else { return false }
            if proven {
                try db.execute(
                    sql: "DELETE FROM apns_credentials WHERE tenant_id = ? AND state = 'active' AND id <> ?",
                    arguments: [tenant.rawValue, id]
                )
            }
            try self.apply(.apnsCredentialsChanged(tenant), db)
            return true
        }
    }

    public func deleteAPNsCredential(tenant: TenantID, id: String, audit: AuditEntry) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "DELETE FROM apns_credentials WHERE tenant_id = ? AND id = ?",
                arguments: [tenant.rawValue, id]
            )
            guard db.changesCount == 1 else { return false }
            try self.apply(.apnsCredentialsChanged(tenant, audit: audit), db)
            return true
        }
    }

    static func apnsCredential(from row: Row) -> StoredAPNsCredential {
        StoredAPNsCredential(
            id: row["id"],
            tenant: TenantID(trusted: row["tenant_id"]),
            kind: APNsCredentialKind(rawValue: row["kind"]) ?? .token,
            teamID: row["team_id"],
            keyID: row["key_id"],
            topics: StoredForm.topics(row["topics"]),
            notAfter: (row["not_after"] as Double?).map(Date.init(unixSeconds:)),
            fingerprint: row["fingerprint"],
            sealed: row["sealed"],
            state: APNsCredentialState(rawValue: row["state"]) ?? .failed,
            createdAt: Date(unixSeconds: row["created_at"]),
            activatedAt: (row["activated_at"] as Double?).map(Date.init(unixSeconds:)),
            lastError: row["last_error"]
        )
    }
}
