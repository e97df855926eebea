import Engine
import Logging

/// Keeps the push transports' uploaded credentials (APNs' and FCM's) in step with the store: all of them at start,
/// a tenant's again when the change feed (or this node's admin API) says they changed, and the verdicts of pushes
/// made with a candidate written back (proven: it becomes the active credential on every node; refused: marked
/// failed).
struct APNsCredentialLoader: Sendable {
    let store: any APNsCredentialStore
    let vault: APNsCredentialVault
    let transport: APNsPushTransport?
    let fcm: FCMPushTransport?
    let gateway: PushGateway?
    let logger: Logger

    /// Loads every tenant's credentials (a credential the key cannot open is skipped, with an error logged: the
    /// tenant pushes with the configuration's credential).
    func loadAll() async throws {
        if let transport {
            let stored = try await store.apnsCredentials(tenant: nil, channel: .apns)
            for (tenant, credentials) in Dictionary(grouping: stored, by: \.tenant) {
                install(tenant, credentials)
            }
            transport.onCandidateVerdict { tenant, id, verdict in
                await settle(tenant, id, .apns, verdict)
            }
        }
        if let fcm {
            let stored = try await store.apnsCredentials(tenant: nil, channel: .fcm)
            for (tenant, credentials) in Dictionary(grouping: stored, by: \.tenant) {
                installFCM(tenant, credentials)
            }
            fcm.onCandidateVerdict { tenant, id, verdict in
                await settle(tenant, id, .fcm, verdict)
            }
        }
    }

    func reload(tenant: TenantID) async {
        do {
            if fcm != nil { installFCM(tenant, try await store.apnsCredentials(tenant: tenant, channel: .fcm)) }
            guard transport != nil else { return }
            install(tenant, try await store.apnsCredentials(tenant: tenant, channel: .apns))
            // A tenant paused for rejected credentials gets another try with the new ones.
            await gateway?.resume(tenant: tenant)
        } catch {
            logger.warning(
                "cannot read the tenant's APNs credentials; it pushes with those it had",
                metadata: ["tenant.id": "\(tenant)", "error": "\(error)"]
            )
        }
    }

    private func install(_ tenant: TenantID, _ credentials: [StoredAPNsCredential]) {
        let selection = APNsCredentialSelection(credentials)
        transport?.install(tenant: tenant, active: opened(selection.active), candidate: opened(selection.candidate))
    }

    private func installFCM(_ tenant: TenantID, _ credentials: [StoredAPNsCredential]) {
        let selection = APNsCredentialSelection(credentials)
        func opened(_ stored: StoredAPNsCredential?) -> FCMPushTransport.Uploaded? {
            guard let stored else { return nil }
            do {
                return FCMPushTransport.Uploaded(id: stored.id, account: try vault.openServiceAccount(stored))
            } catch {
                logger.error(
                    "cannot open an uploaded FCM service account (another credential key?); it is not used",
                    metadata: ["tenant.id": "\(stored.tenant)", "fcm.credential": "\(stored.id)", "error": "\(error)"]
                )
                return nil
            }
        }
        fcm?.install(tenant: tenant, active: opened(selection.active), candidate: opened(selection.candidate))
    }

    private func opened(_ stored: StoredAPNsCredential?) -> APNsPushTransport.Uploaded? {
        guard let stored else { return nil }
        do {
            return APNsPushTransport.Uploaded(id: stored.id, credential: try vault.open(stored))
        } catch {
            logger.error(
                "cannot open an uploaded APNs credential (another credential key?); it is not used",
                metadata: ["tenant.id": "\(stored.tenant)", "apns.credential": "\(stored.id)", "error": "\(error)"]
            )
            return nil
        }
    }

    private func settle(
        _ tenant: TenantID,
        _ id: String,
        _ channel: PushChannel,
        _ verdict: APNsCredentialSelection.Verdict
    ) async {
        var proven = false
        var reason: String?
        switch verdict {
        case .proven: proven = true
        case .refused(let why): reason = why
        }
        // Retried with backoff: the store may be briefly unreachable; the transport already acts on the verdict.
        var delay = Duration.milliseconds(200)
        for _ in 0..<6 {
            do {
                _ = try await store.settleAPNsCredential(
                    tenant: tenant,
                    id: id,
                    channel: channel,
                    proven: proven,
                    reason: reason,
                    at: .now
                )
                return
            } catch {
                try? await Task.sleep(for: delay)
                delay *= 2
            }
        }
        logger.error(
            "cannot record the verdict on a new APNs credential; it is tried again after a restart",
            metadata: ["tenant.id": "\(tenant)", "apns.credential": "\(id)"]
        )
    }
}
