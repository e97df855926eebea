import Foundation

extension Administration {
    // MARK: APNs credentials

    /// Operators may manage any tenant's credentials; its own admins only when an operator allowed them
    /// (`adminsManageAPNsCredentials`).
    func credentialsTenant(_ id: TenantID, by actor: AdminActor) async throws -> Tenant {
        let tenant = try await self.tenant(id, by: actor)
        guard Self.managesAPNsCredentials(tenant, actor) else {
            throw EngineError(.forbidden, "an operator manages this tenant's APNs credentials")
        }
        return tenant
    }

    static func managesAPNsCredentials(_ tenant: Tenant, _ actor: AdminActor) -> Bool {
        actor.role == .operator || tenant.adminsManageAPNsCredentials
    }

    /// The tenant's uploaded credentials, newest first (what they are, never their secrets).
    public func apnsCredentials(tenant: TenantID, by actor: AdminActor) async throws -> [StoredAPNsCredential] {
        _ = try await credentialsTenant(tenant, by: actor)
        return try await store.apnsCredentials(tenant: tenant).reversed()
    }

    /// Checks an upload (the key signs a token; the certificate opens, holds its key, lists the tenant's topic and
    /// has not expired), seals it and stores it as the tenant's pending credential: pushes try it first, and it
    /// replaces the active one when APNs has accepted a push made with it.
    public func uploadAPNsCredential(
        tenant id: TenantID,
        _ upload: APNsCredentialUpload,
        inspector: any APNsCredentialInspector,
        by actor: AdminActor
    ) async throws -> StoredAPNsCredential {
        let tenant = try await credentialsTenant(id, by: actor)
        let credentialID = UUID().uuidString.lowercased()
        let inspected = try inspector.inspect(upload, id: credentialID, tenant: id)
        if inspected.kind == .certificate, !inspected.topics.contains(tenant.apnsTopic) {
            throw EngineError(
                .invalidInput,
                "the certificate's topics (\(inspected.topics.joined(separator: ", "))) do not include the tenant's APNs topic \(tenant.apnsTopic)"
            )
        }
        if let notAfter = inspected.notAfter, notAfter <= now() {
            throw EngineError(.invalidInput, "the certificate expired at \(notAfter)")
        }
        let credential = StoredAPNsCredential(
            id: credentialID,
            tenant: id,
            kind: inspected.kind,
            teamID: inspected.teamID,
            keyID: inspected.keyID,
            topics: inspected.topics,
            notAfter: inspected.notAfter,
            fingerprint: inspected.fingerprint,
            sealed: inspected.sealed,
            state: .pending,
            createdAt: now()
        )
        try await store.addAPNsCredential(
            credential,
            audit: AuditEntry(
                actor,
                "apns-credential.upload",
                tenant: id,
                target: "apns-credential:\(credentialID)",
                at: now()
            )
        )
        return credential
    }

    /// Deletes one of the tenant's credentials: with none left, the tenant pushes with the configuration's.
    public func deleteAPNsCredential(tenant: TenantID, id: String, by actor: AdminActor) async throws {
        _ = try await credentialsTenant(tenant, by: actor)
        let deleted = try await store.deleteAPNsCredential(
            tenant: tenant,
            id: id,
            audit: AuditEntry(
                actor,
                "apns-credential.delete",
                tenant: tenant,
                target: "apns-credential:\(id)",
                at: now()
            )
        )
        guard deleted else { throw EngineError(.notFound, "no APNs credential \(id.prefix(64)) in \(tenant)") }
    }
}
