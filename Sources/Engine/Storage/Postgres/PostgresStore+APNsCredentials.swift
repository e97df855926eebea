import Foundation
import PostgresNIO

extension PostgresStore {
    static let apnsCredentialColumns = """
        id, tenant_id, kind, team_id, key_id, topics, not_after, fingerprint, sealed, state, created_at,
            activated_at, last_error
        """

    public func apnsCredentials(tenant: TenantID?, channel: PushChannel) async throws -> [StoredAPNsCredential] {
        let table = channel.credentialTable
        return try await read { [self] connection in
            let rows =
                if let tenant {
                    try await connection.rows(
                        """
                        SELECT \(unescaped: Self.apnsCredentialColumns) FROM \(unescaped: table)
                        WHERE tenant_id = \(tenant.rawValue) ORDER BY created_at, id
                        """,
                        logger
                    )
                } else {
                    try await connection.rows(
                        """
                        SELECT \(unescaped: Self.apnsCredentialColumns) FROM \(unescaped: table)
                        ORDER BY created_at, id
                        """,
                        logger
                    )
                }
            return try rows.map(Self.apnsCredential(from:))
        }
    }

    public func addAPNsCredential(_ credential: StoredAPNsCredential, audit: AuditEntry) async throws {
        let table = credential.channel.credentialTable
        try await write { [self] connection in
            try await connection.run(
                """
                DELETE FROM \(unescaped: table) WHERE tenant_id = \(credential.tenant.rawValue) AND state = 'pending'
                """,
                logger
            )
            try await connection.run(
                """
                INSERT INTO \(unescaped: table) (\(unescaped: Self.apnsCredentialColumns))
                VALUES (\(credential.id), \(credential.tenant.rawValue), \(credential.kind.rawValue),
                    \(credential.teamID), \(credential.keyID), \(StoredForm.topics(credential.topics)),
                    \(credential.notAfter?.unixSeconds), \(credential.fingerprint), \(credential.sealed),
                    \(credential.state.rawValue), \(credential.createdAt.unixSeconds),
                    \(credential.activatedAt?.unixSeconds), \(credential.lastError))
                """,
                logger
            )
            try await self.apply(.apnsCredentialsChanged(credential.tenant, audit: audit), connection)
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
        return try await write { [self] connection in
            let state = proven ? "active" : "failed"
            let activatedAt = proven ? date.unixSeconds : nil
            let settled = try await connection.run(
                """
                UPDATE \(unescaped: table) SET state = \(state), activated_at = \(activatedAt), last_error = \(reason)
                WHERE tenant_id = \(tenant.rawValue) AND id = \(id) AND state = 'pending' RETURNING 1
                """,
                logger
            )
            guard settled == 1 else { return false }
            if proven {
                try await connection.run(
                    """
                    DELETE FROM \(unescaped: table)
                    WHERE tenant_id = \(tenant.rawValue) AND state = 'active' AND id <> \(id)
                    """,
                    logger
                )
            }
            try await self.apply(.apnsCredentialsChanged(tenant), connection)
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
        return try await write { [self] connection in
            let deleted = try await connection.run(
                """
                DELETE FROM \(unescaped: table) WHERE tenant_id = \(tenant.rawValue) AND id = \(id) RETURNING 1
                """,
                logger
            )
            guard deleted == 1 else { return false }
            try await self.apply(.apnsCredentialsChanged(tenant, audit: audit), connection)
            return true
        }
    }

    /// A row of `apnsCredentialColumns`.
    static func apnsCredential(from row: PostgresRandomAccessRow) throws -> StoredAPNsCredential {
        StoredAPNsCredential(
            id: try row.at(0),
            tenant: TenantID(trusted: try row.at(1)),
            kind: APNsCredentialKind(rawValue: try row.at(2)) ?? .token,
            teamID: try row.at(3),
            keyID: try row.at(4),
            topics: StoredForm.topics(try row.at(5)),
            notAfter: (try row.at(6, as: Double?.self)).map(Date.init(unixSeconds:)),
            fingerprint: try row.at(7),
            sealed: try row.at(8),
            state: APNsCredentialState(rawValue: try row.at(9)) ?? .failed,
            createdAt: Date(unixSeconds: try row.at(10)),
            activatedAt: (try row.at(11, as: Double?.self)).map(Date.init(unixSeconds:)),
            lastError: try row.at(12)
        )
    }
}
