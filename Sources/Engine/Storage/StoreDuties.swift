import Foundation

/// What a write owes the rest of the system besides its own rows, committed in the same transaction: entries in the
/// change feed (other processes drop what they cached of it), audit entries, and webhook events.
///
/// Each kind of write names its duties here, once; both stores carry them out with one function each
/// (`SQLiteStore.apply(_:_:)`, `PostgresStore.apply(_:_:)`), last in the transaction and in the same order (events,
/// audit, then the change feed, whose lock PostgreSQL holds until the commit). So the two adapters cannot drift
/// apart on what a write tells the others, and the shared store tests check the one list.
struct StoreDuties: Sendable {
    private(set) var events: [WebhookEventRecord] = []
    private(set) var audit: [AuditEntry] = []
    private(set) var changes: [(tenant: TenantID, subject: StoreChange.Subject)] = []

    init() {}

    /// Adds another write's duties after these (in place: a batch of marks adds one per read).
    static func += (lhs: inout Self, rhs: Self) {
        lhs.events += rhs.events
        lhs.audit += rhs.audit
        lhs.changes += rhs.changes
    }

    static func + (lhs: Self, rhs: Self) -> Self {
        var joined = lhs
        joined += rhs
        return joined
    }

    var isEmpty: Bool { events.isEmpty && audit.isEmpty && changes.isEmpty }

    // MARK: Audit only

    /// A write no cache holds: an operator account, a webhook endpoint (its dispatcher reads the table).
    static func audited(_ entries: AuditEntry...) -> Self {
        var duties = Self()
        duties.audit = entries
        return duties
    }

    static func audited(_ entries: [AuditEntry]) -> Self {
        var duties = Self()
        duties.audit = entries
        return duties
    }

    // MARK: Tenants and catalogs

    /// A tenant created or its settings or catalog changed: every process drops its catalog cache entry.
    static func tenantChanged(_ tenant: TenantID, audit: AuditEntry? = nil) -> Self {
        var duties = Self.audited(audit.map { [$0] } ?? [])
        duties.changes = [(tenant, .catalog)]
        return duties
    }

    /// A tenant erased: its catalog and its APNs credentials are gone everywhere.
    static func tenantDeleted(_ tenant: TenantID, audit: AuditEntry) -> Self {
        var duties = Self.audited(audit)
        duties.changes = [(tenant, .catalog), (tenant, .apnsCredentials)]
        return duties
    }

    /// A tenant's APNs credentials uploaded, proven, refused or deleted: every node reloads them.
    static func apnsCredentialsChanged(_ tenant: TenantID, audit: AuditEntry? = nil) -> Self {
        var duties = Self.audited(audit.map { [$0] } ?? [])
        duties.changes = [(tenant, .apnsCredentials)]
        return duties
    }

    // MARK: Users

    /// Users created (an admin's or an import's): `user.created` for each.
    static func usersCreated(_ users: [User], audit: [AuditEntry] = [], at now: Date = Date()) -> Self {
        var duties = Self.audited(audit)
        duties.events = users.map {
            .user(.userCreated, tenant: $0.tenant, user: $0.id, username: $0.username, at: now)
        }
        return duties
    }

    /// A user's settings written by an admin: credential caches and profile caches drop them.
    static func userChanged(_ user: User, audit: AuditEntry? = nil) -> Self {
        var duties = Self.audited(audit.map { [$0] } ?? [])
        duties.changes = [(user.tenant, .credentials(username: user.username)), (user.tenant, .profile(user.id))]
        return duties
    }

    /// A user erased: `user.deleted`, and caches drop their credentials and ledger.
    static func userDeleted(
        tenant: TenantID,
        user: UserID,
        username: String,
        audit: AuditEntry,
        at now: Date = Date()
    ) -> Self {
        var duties = Self.audited(audit)
        duties.events = [.user(.userDeleted, tenant: tenant, user: user, username: username, at: now)]
        duties.changes = [(tenant, .credentials(username: username)), (tenant, .ledger(user))]
        return duties
    }

    /// A password changed, or the user was enabled or disabled.
    static func credentialsChanged(tenant: TenantID, username: String) -> Self {
        var duties = Self()
        duties.changes = [(tenant, .credentials(username: username))]
        return duties
    }

    /// The user's own preferences or life areas changed.
    static func profileChanged(tenant: TenantID, user: UserID) -> Self {
        var duties = Self()
        duties.changes = [(tenant, .profile(user))]
        return duties
    }

    // MARK: Deliveries and devices

    /// Deliveries recorded (a scheduler batch, reminders, an admin's): one change entry per tenant for their users.
    static func deliveriesRecorded(_ deliveries: [Delivery], audit: AuditEntry? = nil) -> Self {
        var duties = Self.audited(audit.map { [$0] } ?? [])
        duties.changes = StoredForm.ledgerSubjects(deliveries)
        return duties
    }

    /// A user's deliveries or read state changed in a way the hot state cannot follow.
    static func ledgerChanged(tenant: TenantID, user: UserID) -> Self {
        var duties = Self()
        duties.changes = [(tenant, .ledger(user))]
        return duties
    }

    /// Devices removed (`reason`: `unregistered` by the app or an admin, `apns` when APNs called the token dead):
    /// `device.removed` for each, naming its user.
    static func devicesRemoved(
        tenant: TenantID,
        _ removed: [(user: Int64, token: String)],
        usernames: [Int64: String],
        reason: String,
        at now: Date = Date()
    ) -> Self {
        .events(
            removed.map {
                .deviceRemoved(
                    tenant: tenant,
                    user: UserID($0.user),
                    username: usernames[$0.user],
                    token: $0.token,
                    reason: reason,
                    at: now
                )
            }
        )
    }

    /// Events the write produced (a mark's, a removed device's), for the endpoints that listen.
    static func events(_ records: [WebhookEventRecord]) -> Self {
        var duties = Self()
        duties.events = records
        return duties
    }
}
