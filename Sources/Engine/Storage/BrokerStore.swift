import Foundation

/// The durable state of the broker. Implemented by ``SQLiteStore`` and, for scale-out, a PostgreSQL adapter.
///
/// Every method that reads or writes tenant data takes the tenant, and implementations must scope every
/// statement by it: nothing of one tenant is visible to, or changeable by, another.
/// Multi-row writes are atomic: a method either applies completely or throws and changes nothing.
public protocol BrokerStore: Sendable {
    // MARK: Change feed
    /// Identifies this process in the change feed, so that it can skip its own changes.
    var nodeID: String { get }
    /// Changes that other processes' caches must see (credentials, catalog, ledger), oldest first, at most `limit`.
    func changes(after sequence: Int64, limit: Int) async throws -> [StoreChange]
    /// The newest change's sequence (0 when there is none).
    func latestChangeSequence() async throws -> Int64
    /// Forgets changes older than `date`; returns how many.
    func pruneChanges(before date: Date) async throws -> Int

    // MARK: Tenants
    func createTenant(_ tenant: Tenant) async throws
    func tenant(_ id: TenantID) async throws -> Tenant?
    func tenants() async throws -> [Tenant]
    /// Changes how long APNs keeps a tenant's pushes for offline phones; unknown tenants are `.unknownTenant`.
    func setPushExpiry(tenant: TenantID, _ expiry: PushExpiry) async throws

    // MARK: Users
    func createUser(_ user: NewUser) async throws -> User
    /// Creates many users in one transaction (bulk onboarding): all or none.
    func createUsers(_ users: [NewUser]) async throws -> [User]
    func user(tenant: TenantID, username: String) async throws -> User?
    func user(tenant: TenantID, id: UserID) async throws -> User?
    func users(tenant: TenantID) async throws -> [User]
    /// Replaces the password hash. Returns false if there is no such user.
    func setPassword(tenant: TenantID, username: String, passwordHash: String) async throws -> Bool
    /// Enables or disables the user. Returns false if there is no such user.
    func setEnabled(tenant: TenantID, username: String, enabled: Bool) async throws -> Bool
    func setPreferences(
        tenant: TenantID,
        user: UserID,
        language: String?,
        preferences: DeliveryPreferences
    ) async throws
    func setLifeAreas(tenant: TenantID, user: UserID, scores: LifeAreaScores) async throws

    // MARK: Catalog
    /// Inserts or replaces impulses of one tenant in one transaction; returns how many were new.
    func importImpulses(_ impulses: [Impulse], tenant: TenantID) async throws -> (inserted: Int, updated: Int)
    func impulses(tenant: TenantID) async throws -> [Impulse]
    func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse?

    // MARK: Devices
    /// Makes `device.owner` the one owner of the token within its tenant and topic, atomically.
    func registerDevice(_ device: Device) async throws -> DeviceRegistration
    /// ``registerDevice(_:)`` for many devices in one transaction: all or none.
    func registerDevices(_ devices: [Device]) async throws -> [DeviceRegistration]
    /// Removes the token if `owner` owns it. Returns whether a row was removed.
    func unregisterDevice(tenant: TenantID, topic: String, token: DeviceToken, owner: UserID) async throws -> Bool
    func devices(tenant: TenantID, owner: UserID) async throws -> [Device]
    func device(tenant: TenantID, topic: String, token: DeviceToken) async throws -> Device?
    /// APNs' verdicts on several tokens of one tenant in one transaction; whether each changed a device. A removal
    /// marks the device gone: no read sees it from then on, and ``purgeRemovedDevices(before:)`` deletes it.
    func applyTokenVerdicts(tenant: TenantID, topic: String, _ verdicts: [TokenVerdict]) async throws -> [Bool]
    /// Deletes the devices that verdicts marked gone before `date` (they are invisible already); returns how many.
    func purgeRemovedDevices(before date: Date) async throws -> Int

    // MARK: Deliveries
    /// Records assignments in one transaction. A scheduled delivery for a (user, local date) that already
    /// exists is not inserted again; the result holds only the rows that were inserted.
    func recordDeliveries(_ deliveries: [NewDelivery]) async throws -> [Delivery]
    /// A user's deliveries, newest first: those with `id > after` and `id < before`, at most `limit`.
    func deliveredImpulses(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID?,
        before: DeliveryID?,
        limit: Int
    ) async throws -> [DeliveredImpulse]
    /// The user's newest delivery of one impulse.
    func deliveredImpulse(tenant: TenantID, user: UserID, impulse: ImpulseID) async throws -> DeliveredImpulse?
    func unreadCount(tenant: TenantID, user: UserID) async throws -> Int
    /// How many deliveries each user of the tenant has (for the admin page).
    func deliveryCounts(tenant: TenantID) async throws -> [UserID: Int]
    /// Applies fetched/read marks in one transaction; a mark never overwrites an earlier timestamp.
    func applyMarks(_ marks: [DeliveryMark]) async throws
    /// Deletes all deliveries of a user; returns how many.
    func clearDeliveries(tenant: TenantID, user: UserID) async throws -> Int

    // MARK: Scheduling
    /// Rows of the due index whose fire time is not after `now`, earliest first, at most `limit`: the only way
    /// the scheduler finds work, so its cost follows what is due, not the user count.
    /// With `after`, only rows after that one in (fire time, user) order: the next batch can be read while the
    /// previous one is still being committed.
    func dueSchedules(notAfter now: Date, after: ScheduleCursor?, limit: Int) async throws -> [ScheduleEntry]
    /// One user's row of the due index (for inspection and tests).
    func scheduleEntry(tenant: TenantID, user: UserID) async throws -> ScheduleEntry?
    /// The earliest fire time of any row or reminder.
    func nextFireTime() async throws -> Date?
    /// What each user had since `since` and how far they are in each series.
    func selectionHistories(tenant: TenantID, users: [UserID], since: Date) async throws -> [UserID: SelectionHistory]
    /// Applies a batch of decisions in one transaction: records the day's deliveries (a (user, local date) that
    /// already has one is not recorded again) and moves each row whose fire time is still the one decided on.
    /// Returns the deliveries that were recorded.
    func commitSchedules(_ updates: [ScheduleUpdate]) async throws -> [Delivery]
    /// Deliveries waiting for the push gateway, assigned since `assignedAfter`, by id, after `after`.
    func unsettledDeliveries(assignedAfter: Date, after: DeliveryID?, limit: Int) async throws -> [Delivery]

    /// For a batch of deliveries about to be pushed: each user's devices and, for users with a device, the unread
    /// count, in a few statements.
    func pushTargets(tenant: TenantID, users: [UserID]) async throws -> [UserID: PushTarget]

    // MARK: Reminders
    /// Adds a reminder; throws `.conflict` when the user already has `maximumPending`.
    func createReminder(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        at fireAt: Date,
        maximumPending: Int
    ) async throws -> Reminder
    func reminders(tenant: TenantID, user: UserID) async throws -> [Reminder]
    func deleteReminder(tenant: TenantID, user: UserID, id: Int64) async throws -> Bool
    func dueReminders(notAfter now: Date, limit: Int) async throws -> [Reminder]
    /// Turns reminders into deliveries awaiting a push and removes them, in one transaction; a reminder that is
    /// already gone is skipped.
    func fireReminders(_ reminders: [Reminder], at now: Date) async throws -> [Delivery]
}

/// A position in the due index's (fire time, user) order.
public struct ScheduleCursor: Sendable, Equatable {
    public var fireAt: Date
    public var user: UserID

    public init(fireAt: Date, user: UserID) {
        self.fireAt = fireAt
        self.user = user
    }
}

extension BrokerStore {
    public func dueSchedules(notAfter now: Date, limit: Int) async throws -> [ScheduleEntry] {
        try await dueSchedules(notAfter: now, after: nil, limit: limit)
    }
}

/// What APNs' answer means for a device token.
public struct TokenVerdict: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Malformed or of the other environment: no pushes until it is registered again.
        case quarantine(at: Date)
        /// Removed if registered before the date (`.distantFuture`: whatever its registration time).
        case remove(registeredBefore: Date)
    }

    public var token: DeviceToken
    public var kind: Kind

    public init(token: DeviceToken, kind: Kind) {
        self.token = token
        self.kind = kind
    }
}
