/// A write that cached state elsewhere must notice: the store's change feed.
///
/// Admin commands run in their own process and several broker nodes can share one database, so a node's
/// caches (credentials, catalog, per-user ledger state) follow the feed instead of trusting their own writes.
public struct StoreChange: Sendable, Equatable {
    public enum Subject: Sendable, Equatable {
        /// A password changed or the user was enabled or disabled.
        case credentials(username: String)
        /// The user's deliveries or read state changed.
        case ledger(UserID)
        /// Several users' deliveries changed in one transaction (a scheduler batch): one entry, not one each.
        case ledgers([UserID])
        /// The tenant's catalog changed.
        case catalog
        /// The user's profile or preferences changed.
        case profile(UserID)
        /// The tenant's APNs credentials changed (uploaded, proven, refused, deleted).
        case apnsCredentials
    }

    public var sequence: Int64
    public var tenant: TenantID
    public var subject: Subject
    /// The ``BrokerStore/nodeID`` of the process that wrote it.
    public var origin: String

    public init(sequence: Int64, tenant: TenantID, subject: Subject, origin: String) {
        self.sequence = sequence
        self.tenant = tenant
        self.subject = subject
        self.origin = origin
    }
}
