import Foundation
import GRDB

extension SQLiteStore {
    public func apnsCredentials(tenant: TenantID?, channel: PushChannel) async throws -> [StoredAPNsCredential] {
        let table = channel.credentialTable
        return try await read { db in
            let rows =
                if let tenant {
                    try Row.fetchAll(
                        db,
                        sql: "SELECT * FROM \(table) WHERE tenant_id = ? ORDER BY created_at, id",
                        arguments: [tenant.rawValue]
                    )
                } else {
                    try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY created_at, id")
                }
            return rows.map(Self.apnsCredential(from:))
        }
    }

    public func addAPNsCredential(_ credential: StoredAPNsCredential, audit: AuditEntry) async throws {
        let table = credential.channel.credentialTable
        try await write { db in
            try db.execute(
                sql: "DELETE FROM \(table) WHERE tenant_id = ? AND state = 'pending'",
                arguments: [credential.tenant.rawValue]
            )
            try db.execute(
                sql: """
                    INSERT INTO \(table) (id, tenant_id, kind, team_id, key_id, topics, not_after, fingerprint,
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
        channel: PushChannel,
        proven: Bool,
        reason: String?,
        at date: Date
    ) async throws -> Bool {
        let table = channel.credentialTable
        return try await write { db in
            try db.execute(
                sql: """
                    UPDATE \(table) SET state = ?, activated_at = ?, last_error = ?
                    WHERE tenant_id = ? AND id = ? AND state = 'pending'
                    """,
                arguments: [
                    proven ? "active" : "failed", proven ? date.unixSeconds : nil, reason, tenant.rawValue, id,
                ]
            )
            guard db.changesCount == 1 else { return false }
            if proven {
                try db.execute(
                    sql: "DELETE FROM \(table) WHERE tenant_id = ? AND state = 'active' AND id <> ?",
                    arguments: [tenant.rawValue, id]
                )
            }
            try self.apply(.apnsCredentialsChanged(tenant), db)
            return true
        }
    }

    public func deleteAPNsCredential(
        tenant: TenantID,
        id: String,
        channel: PushChannel,
        audit: AuditEntry
    ) async throws -> Bool {
        let table = channel.credentialTable
        return try await write { db in
            try db.execute(
                sql: "DELETE FROM \(table) WHERE tenant_id = ? AND id = ?",
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
