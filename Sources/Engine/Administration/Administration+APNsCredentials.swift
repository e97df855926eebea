import Foundation

extension Administration {
    // MARK: APNs credentials

    /// Operators may manage any tenant's push credentials (APNs keys and certificates, FCM service accounts); its
    /// own admins only when an operator allowed them (`adminsManageAPNsCredentials`, which covers both channels).
    func credentialsTenant(_ id: TenantID, by actor: AdminActor) async throws -> Tenant {
        let tenant = try await self.tenant(id, by: actor)
        guard Self.managesAPNsCredentials(tenant, actor) else {
            throw EngineError(
                .forbidden,
                "an operator manages this tenant's push credentials (APNs and FCM): ask one to upload it, or to allow "
                    + "the tenant's admins to (adminsManageAPNsCredentials)"
            )
        }
        return tenant
    }

    static func managesAPNsCredentials(_ tenant: Tenant, _ actor: AdminActor) -> Bool {
        actor.role == .operator || tenant.adminsManageAPNsCredentials
    }

    /// The tenant's uploaded credentials of one channel, newest first (what they are, never their secrets).
    public func apnsCredentials(
        tenant: TenantID,
        channel: PushChannel = .apns,
        by actor: AdminActor
    ) async throws -> [StoredAPNsCredential] {
        _ = try await credentialsTenant(tenant, by: actor)
        return try await store.apnsCredentials(tenant: tenant, channel: channel).reversed()
    }

    /// Checks an upload (the key signs a token; the certificate opens, holds its key, lists the tenant's topic and
    /// has not expired; the service account's key signs an assertion its public key verifies), seals it and stores
    /// it as the tenant's pending credential of its channel: pushes try it first, and it replaces the active one
    /// when the channel has accepted a push made with it.
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
                upload.channel == .apns ? "apns-credential.upload" : "fcm-credential.upload",
                tenant: id,
                target: "\(upload.channel.rawValue)-credential:\(credentialID)",
                at: now()
            )
        )
        return credential
    }

    /// Deletes one of the tenant's credentials of a channel: with none left, the tenant pushes with the
    /// configuration's.
    public func deleteAPNsCredential(
        tenant: TenantID,
        id: String,
        channel: PushChannel = .apns,
        by actor: AdminActor
    ) async throws {
        _ = try await credentialsTenant(tenant, by: actor)
        let deleted = try await store.deleteAPNsCredential(
            tenant: tenant,
            id: id,
            channel: channel,
            audit: AuditEntry(
                actor,
                "\(channel.rawValue)-credential.delete",
                tenant: tenant,
                target: "\(channel.rawValue)-credential:\(id)",
                at: now()
            )
        )
        guard deleted else {
            throw EngineError(
                .notFound,
                "no \(channel == .apns ? "APNs" : "FCM") credential \(id.prefix(64)) in \(tenant)"
            )
        }
    }
}
