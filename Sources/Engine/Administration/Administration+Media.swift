import Foundation

extension Administration {
    // MARK: Media

    /// The files of the tenant's media folder, by name.
    public func media(tenant: TenantID, in folder: any MediaStore, by actor: AdminActor) async throws -> [MediaFile] {
        _ = try await self.tenant(tenant, by: actor)
        return try await folder.media(tenant: tenant).sorted { $0.name < $1.name }
    }

    /// Writes a file to the tenant's media folder from its parts as they arrive, replacing one of the same name
    /// whole; true when it is new. The name's extension, the stated `contentType` and the file's first bytes must
    /// name the same kind, and the file must fit `limits`. Nothing is visible under the name until the last
    /// byte is written; a refused or broken upload leaves no trace.
    public func uploadMedia<Parts: AsyncSequence>(
        tenant: TenantID,
        name: String,
        contentType: String?,
        statedSize: Int? = nil,
        parts: Parts,
        limits: MediaLimits,
        to folder: any MediaStore,
        by actor: AdminActor
    ) async throws -> (file: MediaFile, created: Bool) where Parts.Element == [UInt8] {
        _ = try await self.tenant(tenant, by: actor)
        let name = try MediaName(name)
        let stated = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard stated == name.kind.contentType else {
            throw EngineError(
                .unsupportedType,
                "\(name) is sent as \(name.kind.contentType), not \(stated ?? "without a Content-Type")"
            )
        }
        if let statedSize, statedSize > limits.fileSize {
            throw EngineError(.tooLarge, "a media file is at most \(limits.fileSize) bytes")
        }
        let upload = try await folder.beginUpload(tenant: tenant, name: name)
        do {
            // Quota is held before bytes are written: all of a stated size at once (so that parallel uploads near
            // the quota are refused before they start rather than all at their end), else as the parts arrive.
            var reserved = 0
            if let statedSize {
                try await upload.reserve(statedSize, quota: limits.tenantQuota)
                reserved = statedSize
            }
            var head: [UInt8] = []
            // Parts that came before the first bytes could be checked (a client may send tiny pieces).
            var held: [[UInt8]] = []
            var size = 0
            var checked = false
            for try await part in parts {
                size += part.count
                guard size <= limits.fileSize else {
                    throw EngineError(.tooLarge, "a media file is at most \(limits.fileSize) bytes")
                }
                if size > reserved {
                    try await upload.reserve(size - reserved, quota: limits.tenantQuota)
                    reserved = size
                }
                if !checked {
                    head += part.prefix(MediaKind.signatureLength - head.count)
                    if head.count < MediaKind.signatureLength {
                        held.append(part)
                        continue
                    }
                    try Self.checkSignature(head, name: name)
                    checked = true
                    for earlier in held { try await upload.write(earlier) }
                    held = []
                }
                try await upload.write(part)
            }
            guard size > 0 else { throw EngineError(.invalidInput, "the media file is empty") }
            if !checked {
                try Self.checkSignature(head, name: name)
                for earlier in held { try await upload.write(earlier) }
            }
            // An upload the server gave up on (its deadline passed, its client went) is not kept.
            try Task.checkCancellation()
            try await store.recordAudit(
                AuditEntry(actor, "media.upload", tenant: tenant, target: "media:\(name)", at: now())
            )
            // Again after the audit, which may have waited for the store past the deadline: the client was answered
            // 503, and the file stays out (the audit entry then tells of an upload that was not kept).
            try Task.checkCancellation()
            let created = try await upload.commit(quota: limits.tenantQuota)
            return (MediaFile(name: name, tenant: tenant, size: size, modifiedAt: now()), created)
        } catch {
            await upload.abort()
            throw error
        }
    }

    private static func checkSignature(_ head: [UInt8], name: MediaName) throws(EngineError) {
        guard name.kind.matches(head) else {
            throw EngineError(.invalidInput, "the content of \(name) is not \(name.kind.contentType)")
        }
    }

    /// Removes a file from the tenant's media folder, unless an impulse still in use links it (retire or change
    /// the impulse first).
    public func deleteMedia(
        tenant: TenantID,
        name: String,
        in folder: any MediaStore,
        by actor: AdminActor
    )
        async throws
    {
        _ = try await self.tenant(tenant, by: actor)
        let name = try MediaName(name)
        let path = name.path(tenant: tenant)
        let linking = try await store.impulses(tenant: tenant).filter { impulse in
            !impulse.retired && (impulse.imageURLs.contains(path) || impulse.videoURL == path)
        }
        if let first = linking.first {
            throw EngineError(
                .conflict,
                "impulse \(first.id) links \(path); retire it or change its media first"
            )
        }
        guard try await folder.media(tenant: tenant).contains(where: { $0.name == name.rawValue }) else {
            throw EngineError(.notFound, "no media file \(name) in \(tenant)")
        }
        try await store.recordAudit(
            AuditEntry(actor, "media.delete", tenant: tenant, target: "media:\(name)", at: now())
        )
        _ = try await folder.deleteMedia(tenant: tenant, name: name)
    }
}
