import Foundation

/// An operator account: node-wide administration over HTTP, with a bcrypt password like a user's.
public struct OperatorAccount: Sendable, Equatable {
    public var name: String
    /// A bcrypt hash; never logged, never returned.
    public var passwordHash: String
    public var createdAt: Date

    public init(name: String, passwordHash: String, createdAt: Date) {
        self.name = name
        self.passwordHash = passwordHash
        self.createdAt = createdAt
    }
}

/// How many rows an erasure removed, per kind.
public struct ErasureReport: Sendable, Equatable, Codable {
    public var users = 0
    public var devices = 0
    public var deliveries = 0
    public var reminders = 0
    public var impulses = 0
    /// Files of the tenant's media folder.
    public var mediaFiles = 0

    public init(
        users: Int = 0,
        devices: Int = 0,
        deliveries: Int = 0,
        reminders: Int = 0,
        impulses: Int = 0,
        mediaFiles: Int = 0
    ) {
        self.users = users
        self.devices = devices
        self.deliveries = deliveries
        self.reminders = reminders
        self.impulses = impulses
        self.mediaFiles = mediaFiles
    }
}

/// The writes of the administration (``Administration``): each commits with its audit entry in one transaction,
/// so a change is never without its record, nor a record without its change.
public protocol AdministrationStore: Sendable {
    func createOperator(_ account: OperatorAccount, audit: AuditEntry) async throws
    func operatorAccount(name: String) async throws -> OperatorAccount?
    func operatorAccounts() async throws -> [OperatorAccount]

    func createTenant(_ tenant: Tenant, audit: AuditEntry) async throws
    /// Replaces the tenant's settings (not its id or creation time). Suspending parks every due row of the
    /// tenant; resuming plans them again.
    func updateTenant(_ tenant: Tenant, audit: AuditEntry) async throws
    /// Erases every row of the tenant but its audit trail.
    func deleteTenant(_ tenant: TenantID, audit: AuditEntry) async throws -> ErasureReport

    func createUser(_ user: NewUser, audit: AuditEntry) async throws -> User
    /// Replaces the user's language, life areas, preferences, enabled and admin flags and, if given, password hash.
    func updateUser(_ user: User, passwordHash: String?, audit: AuditEntry) async throws -> User
    /// Writes an import's users in one transaction with their audit entries: all of them, or none (a username
    /// taken meanwhile fails the whole call).
    func writeUsers(_ writes: [UserWrite], audit: [AuditEntry]) async throws
    /// Erases the user with their devices, deliveries, reminders and row of the due index.
    func deleteUser(tenant: TenantID, user: UserID, audit: AuditEntry) async throws -> ErasureReport
    /// A page of the tenant's users by username, after `after`, whose username contains `search` (case-insensitive).
    func userPage(tenant: TenantID, search: String?, after: String?, limit: Int) async throws -> [User]

    /// Creates or replaces impulses of the tenant (a retired one stays retired).
    func importImpulses(
        _ impulses: [Impulse],
        tenant: TenantID,
        audit: AuditEntry
    ) async throws -> (
        inserted: Int, updated: Int
    )
    /// Retires an impulse (never chosen again) or brings it back.
    func setImpulseRetired(tenant: TenantID, impulse: ImpulseID, retired: Bool, audit: AuditEntry) async throws
    /// Records deliveries an admin made (as ``LedgerStore/recordDeliveries(_:)`` does).
    func recordDeliveries(_ deliveries: [NewDelivery], audit: AuditEntry) async throws -> [Delivery]

    /// Records an action that changed nothing in the store (an export of a user's data).
    func recordAudit(_ entry: AuditEntry) async throws
    /// The trail, newest first: before the entry `before`, of `tenant` only when given.
    func auditEntries(tenant: TenantID?, before: Int64?, limit: Int) async throws -> [AuditEntry]
}

/// What a change of a tenant's settings does to its rows of the due index (the stores' rule, in one place).
public enum DueIndexChange: Sendable, Equatable {
    /// Suspended: every row leaves the index (fire time NULL) until the tenant is resumed.
    case park
    /// Resumed, or a new default time zone, delivery time, quiet hours, programme days or learned-time settings:
    /// every row is planned again (fire time 0).
    case plan

    /// The change from `before` to `after`, or nil when the rows stay as they are.
    public init?(from before: Tenant, to after: Tenant) {
        if after.suspended {
            if before.suspended { return nil }
            self = .park
            return
        }
        let moved =
            before.defaultTimeZone != after.defaultTimeZone || before.defaultDeliveryTime != after.defaultDeliveryTime
            || before.defaultQuietHours != after.defaultQuietHours || before.weekdays != after.weekdays
            || before.learnedTiming != after.learnedTiming
        guard before.suspended || moved else { return nil }
        self = .plan
    }

    /// The fire time the rows get.
    public var fireAt: Double? { self == .plan ? 0 : nil }
}
