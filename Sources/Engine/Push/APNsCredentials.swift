import Foundation

/// How an uploaded push credential authenticates.
public enum APNsCredentialKind: String, Sendable, Codable {
    /// APNs: a provider-token signing key (`.p8`): team id, key id and a P-256 key.
    case token
    /// APNs: a TLS client certificate with its key (from a PKCS#12 bundle).
    case certificate
    /// FCM: a service account's JSON key (project, account address, RSA key).
    case serviceAccount = "service-account"
}

/// Where an uploaded credential stands in its tenant's rotation.
public enum APNsCredentialState: String, Sendable, Codable {
    /// Uploaded and valid, not yet proven: pushes try it first and fall back to the active one.
    case pending
    /// Proven by a push APNs accepted; the tenant's pushes use it.
    case active
    /// APNs refused it (a pending credential never proven); kept for the record until deleted.
    case failed
}

/// A credential as the store keeps it: what it is, and its secret sealed with the broker's credential key. The
/// fields serve both channels: for an FCM service account, `teamID` is the Firebase project, `keyID` the key's id
/// and `topics` the account's address.
public struct StoredAPNsCredential: Sendable, Equatable {
    public var id: String
    public var tenant: TenantID
    public var kind: APNsCredentialKind
    public var teamID: String?
    public var keyID: String?
    /// A certificate's topics (bundle ids); empty for a signing key (it serves every app of its team).
    public var topics: [String]
    public var notAfter: Date?
    /// SHA-256 of the public key (a signing key) or of the certificate (DER), hex: tells two uploads apart.
    public var fingerprint: String
    /// The secret, sealed (AES-GCM, base64); never returned by any route, never logged.
    public var sealed: String
    public var state: APNsCredentialState
    public var createdAt: Date
    public var activatedAt: Date?
    /// Why APNs refused it (a failed credential).
    public var lastError: String?

    /// The channel it pushes to (its kind tells).
    public var channel: PushChannel { kind.channel }

    public init(
        id: String,
        tenant: TenantID,
        kind: APNsCredentialKind,
        teamID: String?,
        keyID: String?,
        topics: [String],
        notAfter: Date?,
        fingerprint: String,
        sealed: String,
        state: APNsCredentialState,
        createdAt: Date,
        activatedAt: Date? = nil,
        lastError: String? = nil
    ) {
        self.id = id
        self.tenant = tenant
        self.kind = kind
        self.teamID = teamID
        self.keyID = keyID
        self.topics = topics
        self.notAfter = notAfter
        self.fingerprint = fingerprint
        self.sealed = sealed
        self.state = state
        self.createdAt = createdAt
        self.activatedAt = activatedAt
        self.lastError = lastError
    }
}

/// An upload as the administrator sends it: the secret material in the clear (only in memory, until sealed).
public enum APNsCredentialUpload: Sendable {
    case token(teamID: String, keyID: String, privateKeyPEM: String)
    case certificate(pkcs12: [UInt8], passphrase: String)
    /// An FCM service account's JSON key file.
    case serviceAccount(json: Data)

    public var channel: PushChannel {
        if case .serviceAccount = self { .fcm } else { .apns }
    }
}

extension APNsCredentialKind {
    public var channel: PushChannel { self == .serviceAccount ? .fcm : .apns }
}

/// What checking an upload learned, and the upload sealed.
public struct InspectedAPNsCredential: Sendable {
    public var kind: APNsCredentialKind
    public var teamID: String?
    public var keyID: String?
    public var topics: [String]
    public var notAfter: Date?
    public var fingerprint: String
    public var sealed: String

    public init(
        kind: APNsCredentialKind,
        teamID: String?,
        keyID: String?,
        topics: [String],
        notAfter: Date?,
        fingerprint: String,
        sealed: String
    ) {
        self.kind = kind
        self.teamID = teamID
        self.keyID = keyID
        self.topics = topics
        self.notAfter = notAfter
        self.fingerprint = fingerprint
        self.sealed = sealed
    }
}

/// Checks and seals uploads (the push side knows keys and certificates): a signing key must sign a provider
/// token that its public key verifies; a PKCS#12 bundle must open with its passphrase and hold a certificate with
/// its key. Throws `.invalidInput` naming what is wrong, never echoing the secret; `.conflict` when the broker
/// has no credential key to seal with.
public protocol APNsCredentialInspector: Sendable {
    func inspect(_ upload: APNsCredentialUpload, id: String, tenant: TenantID) throws -> InspectedAPNsCredential
}

/// The credentials uploaded over the admin API, one rotation per tenant and channel (APNs' and FCM's in tables of
/// their own: a node of the previous release never touches FCM's). Every write logs an `.apnsCredentials` change,
/// so every node's push gateway loads the tenant's credentials again.
public protocol APNsCredentialStore: Sendable {
    /// One tenant's, or every tenant's (nil), of one channel, oldest first.
    func apnsCredentials(tenant: TenantID?, channel: PushChannel) async throws -> [StoredAPNsCredential]
    /// Adds a pending credential, replacing the tenant's other pending one of its channel (never proven) if any.
    func addAPNsCredential(_ credential: StoredAPNsCredential, audit: AuditEntry) async throws
    /// Settles a pending credential once APNs answered a push made with it: proven, it becomes the tenant's active
    /// credential and the one it replaces is deleted; refused, it is marked failed with the reason. False when
    /// it was no longer pending (another node settled it first).
    func settleAPNsCredential(
        tenant: TenantID,
        id: String,
        channel: PushChannel,
        proven: Bool,
        reason: String?,
        at: Date
    ) async throws
        -> Bool
    /// Deletes a credential of the channel; false when there was none.
    func deleteAPNsCredential(
        tenant: TenantID,
        id: String,
        channel: PushChannel,
        audit: AuditEntry
    ) async throws
        -> Bool
}

extension APNsCredentialStore {
    /// APNs' credentials.
    public func apnsCredentials(tenant: TenantID?) async throws -> [StoredAPNsCredential] {
        try await apnsCredentials(tenant: tenant, channel: .apns)
    }
}

extension PushChannel {
    /// The table of the channel's uploaded credentials.
    var credentialTable: String { self == .apns ? "apns_credentials" : "fcm_credentials" }
}

/// Which of a tenant's stored credentials its pushes use: the active one, and a pending one tried first until
/// APNs answers it (the rotation keeps the old credential until the new one has pushed successfully).
public struct APNsCredentialSelection: Sendable, Equatable {
    public var active: StoredAPNsCredential?
    public var candidate: StoredAPNsCredential?

    public init(_ stored: [StoredAPNsCredential]) {
        let newestFirst = stored.sorted { ($0.createdAt, $0.id) > ($1.createdAt, $1.id) }
        active = newestFirst.first { $0.state == .active }
        candidate = newestFirst.first { $0.state == .pending }
    }

    /// What APNs' answer to a push made with a candidate says of it: proven (accepted), refused (the credential
    /// itself was rejected), or nothing yet (an answer about the device, the payload or the connection).
    public enum Verdict: Sendable, Equatable {
        case proven
        case refused(reason: String)
    }

    public static func verdict(on result: PushResult) -> Verdict? {
        switch result {
        case .accepted: return .proven
        case .rejected(403, let reason, _) where PushOutcome.tenantConfigurationErrors.contains(reason):
            return .refused(reason: reason)
        case .rejected(400, "TopicDisallowed", _):
            return .refused(reason: "TopicDisallowed")
        default: return nil
        }
    }
}
