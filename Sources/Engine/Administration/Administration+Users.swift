import Foundation

/// What an admin may set on a user: every member optional, those given replace the user's.
public struct UserChanges: Sendable, Equatable, Decodable {
    public var language: String?
    public var timeZone: String?
    public var deliveryTime: LocalTime?
    public var quietHours: QuietHours?
    public var weekdays: Weekdays?
    /// Scores from the screening, 0-100, by life area (`work`, `health`, ...); areas not given keep theirs.
    public var lifeAreas: [String: Int]?
    public var enabled: Bool?
    /// May use the tenant's admin API and `/SendPush`.
    public var admin: Bool?

    public init(
        language: String? = nil,
        timeZone: String? = nil,
        deliveryTime: LocalTime? = nil,
        quietHours: QuietHours? = nil,
        weekdays: Weekdays? = nil,
        lifeAreas: [String: Int]? = nil,
        enabled: Bool? = nil,
        admin: Bool? = nil
    ) {
        self.language = language
        self.timeZone = timeZone
        self.deliveryTime = deliveryTime
        self.quietHours = quietHours
        self.weekdays = weekdays
        self.lifeAreas = lifeAreas
        self.enabled = enabled
        self.admin = admin
    }

    /// The user with these changes, each checked; nothing changes if one is invalid.
    func apply(to user: inout User) throws(EngineError) {
        var changed = user
        if let language { changed.language = try validatedLanguage(language) }
        if let timeZone { changed.preferences.timeZone = try validatedTimeZone(timeZone) }
        if let deliveryTime { changed.preferences.deliveryTime = deliveryTime }
        if let quietHours { changed.preferences.quietHours = quietHours }
        if let weekdays { changed.preferences.weekdays = weekdays }
        if let lifeAreas {
            var values = changed.lifeAreas.values
            for (name, score) in lifeAreas {
                guard let area = LifeArea(rawValue: name), let index = LifeArea.allCases.firstIndex(of: area) else {
                    let known = LifeArea.allCases.map(\.rawValue).joined(separator: ", ")
                    throw EngineError(.invalidInput, "unknown life area '\(name)' (known: \(known))")
                }
                values[index] = score
            }
            changed.lifeAreas = try LifeAreaScores(values)
        }
        if let enabled { changed.enabled = enabled }
        if let admin { changed.isAdmin = admin }
        user = changed
    }
}

/// A new user as an admin creates it: a username, a password, and any of the settings ``UserChanges`` takes.
public struct UserDraft: Sendable, Decodable {
    public var username: String
    public var password: String
    public var settings: UserChanges
    /// When this user starts (`next-delivery-time` or `immediate`); nil: as the tenant's setting says.
    public var firstDelivery: String?

    public init(username: String, password: String, settings: UserChanges = .init(), firstDelivery: String? = nil) {
        self.username = username
        self.password = password
        self.settings = settings
        self.firstDelivery = firstDelivery
    }

    enum CodingKeys: String, CodingKey { case username, password, firstDelivery }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        username = try container.decode(String.self, forKey: .username)
        password = try container.decode(String.self, forKey: .password)
        firstDelivery = try container.decodeIfPresent(String.self, forKey: .firstDelivery)
        settings = try UserChanges(from: decoder)
    }
}

/// Everything the broker holds of one user (the right of access), as one document; no password hash.
public struct UserExport: Sendable, Encodable {
    public struct Profile: Sendable, Encodable {
        public var username: String
        public var tenant: String
        public var language: String?
        public var lifeAreas: [String: Int]
        public var enabled: Bool
        public var admin: Bool
        public var preferences: DeliveryPreferences
        public var createdAt: Date
    }

    public struct DeviceRecord: Sendable, Encodable {
        public var token: String
        /// `apns` or `fcm`.
        public var platform: String
        public var name: String
        public var environment: String
        public var registeredAt: Date
    }

    public struct DeliveryRecord: Sendable, Encodable {
        public var impulse: String
        public var kind: String
        public var localDate: String?
        public var assignedAt: Date
        public var pushedAt: Date?
        /// The channels that accepted its push (`apns`, `fcm`).
        public var channels: [String]
        public var fetchedAt: Date?
        public var readAt: Date?
    }

    public struct ReminderRecord: Sendable, Encodable {
        public var impulse: String
        public var remindAt: Date
        public var createdAt: Date
    }

    public var exportedAt: Date
    public var user: Profile
    public var devices: [DeviceRecord]
    public var deliveries: [DeliveryRecord]
    public var reminders: [ReminderRecord]
    /// The learned delivery time and what it was learned from (personal data: erasure removes it).
    public var learnedTime: LearnedTimeExport
}

extension Administration {
    /// A page of the tenant's users by username (after `after`), optionally only those whose username contains
    /// `search`.
    public func users(
        tenant: TenantID,
        search: String?,
        after: String?,
        limit: Int,
        by actor: AdminActor
    ) async throws -> [User] {
        _ = try await self.tenant(tenant, by: actor)
        return try await store.userPage(tenant: tenant, search: search, after: after, limit: min(max(limit, 1), 500))
    }

    public func user(tenant: TenantID, username: String, by actor: AdminActor) async throws -> User {
        _ = try await self.tenant(tenant, by: actor)
        guard let user = try await store.user(tenant: tenant, username: username) else {
            throw EngineError(.notFound, "no user \(username) in tenant \(tenant)")
        }
        return user
    }

    public func createUser(tenant: TenantID, _ draft: UserDraft, by actor: AdminActor) async throws -> User {
        let owner = try await self.tenant(tenant, by: actor)
        try Self.validate(password: draft.password)
        let start = try draft.firstDelivery.map { (text) throws(EngineError) in try FirstDelivery(parsing: text) }
        var (new, enabled) = try Self.newUser(
            tenant: tenant,
            username: draft.username,
            draft.settings,
            starting: start ?? owner.firstDelivery,
            at: now()
        )
        guard try await store.user(tenant: tenant, username: draft.username) == nil else {
            throw EngineError(.conflict, "user \(draft.username) already exists in tenant \(tenant)")
        }
        new.passwordHash = try await hashPassword(draft.password, tenant)
        var user = try await store.createUser(new, audit: audit(actor, "user.create", tenant, draft.username))
        if !enabled {
            user.enabled = false
            user = try await store.updateUser(
                user,
                passwordHash: nil,
                audit: audit(actor, "user.update", tenant, user.username)
            )
        }
        return user
    }

    public func updateUser(
        tenant: TenantID,
        username: String,
        _ changes: UserChanges,
        by actor: AdminActor
    ) async throws -> User {
        var user = try await self.user(tenant: tenant, username: username, by: actor)
        try changes.apply(to: &user)
        return try await store.updateUser(user, passwordHash: nil, audit: audit(actor, "user.update", tenant, username))
    }

    public func resetPassword(tenant: TenantID, username: String, password: String, by actor: AdminActor) async throws {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        try Self.validate(password: password)
        let hash = try await hashPassword(password, tenant)
        _ = try await store.updateUser(user, passwordHash: hash, audit: audit(actor, "user.password", tenant, username))
    }

    /// Erases the user and everything of theirs (the right to erasure).
    public func deleteUser(tenant: TenantID, username: String, by actor: AdminActor) async throws -> ErasureReport {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        return try await store.deleteUser(
            tenant: tenant,
            user: user.id,
            audit: audit(actor, "user.delete", tenant, username)
        )
    }

    /// A user with their devices and pending reminders, as the console's user page shows them (a look, not an
    /// export: not audited).
    public func userDetail(
        tenant: TenantID,
        username: String,
        by actor: AdminActor
    ) async throws -> (user: User, devices: [Device], reminders: [Reminder]) {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        return (
            user,
            try await store.devices(tenant: tenant, owner: user.id),
            try await store.reminders(tenant: tenant, user: user.id)
        )
    }

    /// Everything held of the user as one document (the right of access); the export itself is audited.
    public func exportUser(tenant: TenantID, username: String, by actor: AdminActor) async throws -> UserExport {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        let devices = try await store.devices(tenant: tenant, owner: user.id)
        var deliveries: [DeliveredImpulse] = []
        var before: DeliveryID?
        while true {
            let page = try await store.deliveredImpulses(
                tenant: tenant,
                user: user.id,
                after: nil,
                before: before,
                limit: 500
            )
            deliveries += page
            guard page.count == 500, let last = page.last else { break }
            before = last.delivery.id
        }
        let reminders = try await store.reminders(tenant: tenant, user: user.id)
        let owner = try await self.tenant(tenant, by: actor)
        let timing = try await store.userTiming(tenant: tenant, user: user.id)
        try await store.recordAudit(audit(actor, "user.export", tenant, username))
        return UserExport(
            exportedAt: now(),
            user: .init(
                username: user.username,
                tenant: tenant.rawValue,
                language: user.language,
                lifeAreas: Dictionary(
                    uniqueKeysWithValues: LifeArea.allCases.map { ($0.rawValue, user.lifeAreas[$0]) }
                ),
                enabled: user.enabled,
                admin: user.isAdmin,
                preferences: user.preferences,
                createdAt: user.createdAt
            ),
            devices: devices.map {
                .init(
                    token: $0.token.rawValue,
                    platform: $0.channel.rawValue,
                    name: $0.name,
                    environment: $0.environment.rawValue,
                    registeredAt: $0.registeredAt
                )
            },
            deliveries: deliveries.map {
                .init(
                    impulse: $0.delivery.impulse.rawValue,
                    kind: $0.delivery.kind.rawValue,
                    localDate: $0.delivery.localDate,
                    assignedAt: $0.delivery.assignedAt,
                    pushedAt: $0.delivery.pushedAt,
                    channels: $0.delivery.channels.channels.map(\.rawValue),
                    fetchedAt: $0.delivery.fetchedAt,
                    readAt: $0.delivery.readAt
                )
            },
            reminders: reminders.map {
                .init(impulse: $0.impulse.rawValue, remindAt: $0.fireAt, createdAt: $0.createdAt)
            },
            learnedTime: LearnedTimeExport(tenant: owner, user: user, timing: timing)
        )
    }

    /// The user's learned delivery time and why it is what it is (a look: not audited).
    public func learnedTime(tenant: TenantID, username: String, by actor: AdminActor) async throws -> LearnedTimeView {
        let owner = try await self.tenant(tenant, by: actor)
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        return LearnedTimeView(
            tenant: owner,
            user: user,
            timing: try await store.userTiming(tenant: tenant, user: user.id)
        )
    }

    /// Whether the user lets a delivery time they set themselves be learned (audited as a change of the user).
    public func setLearnedTimeOptIn(
        tenant: TenantID,
        username: String,
        optedIn: Bool,
        by actor: AdminActor
    ) async throws -> LearnedTimeView {
        let user = try await self.user(tenant: tenant, username: username, by: actor)
        try await store.setTimingOptIn(
            tenant: tenant,
            user: user.id,
            optedIn: optedIn,
            audit: audit(actor, optedIn ? "user.learned-time.opt-in" : "user.learned-time.opt-out", tenant, username)
        )
        return try await learnedTime(tenant: tenant, username: username, by: actor)
    }

    /// A new user with `settings` applied as to an existing one (checked the same way), and whether it starts
    /// enabled; its password hash is set by the caller.
    static func newUser(
        tenant: TenantID,
        username: String,
        passwordHash: String = "",
        _ settings: UserChanges,
        starting firstDelivery: FirstDelivery,
        at now: Date
    ) throws -> (NewUser, enabled: Bool) {
        var candidate = User(
            id: UserID(0),
            tenant: tenant,
            username: username,
            passwordHash: passwordHash,
            language: nil,
            lifeAreas: .neutral,
            enabled: true,
            preferences: .init(),
            createdAt: now
        )
        try settings.apply(to: &candidate)
        let new = try NewUser(
            tenant: tenant,
            username: username,
            passwordHash: passwordHash,
            language: candidate.language,
            lifeAreas: candidate.lifeAreas,
            preferences: candidate.preferences,
            isAdmin: candidate.isAdmin,
            startsAt: firstDelivery.startsAt(createdAt: now)
        )
        return (new, candidate.enabled)
    }

    func audit(_ actor: AdminActor, _ action: String, _ tenant: TenantID, _ username: String) -> AuditEntry {
        AuditEntry(actor, action, tenant: tenant, target: "user:\(username)", at: now())
    }
}
