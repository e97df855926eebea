import Foundation

/// When a user wants pushes. Unset members fall back to the tenant's defaults.
public struct DeliveryPreferences: Sendable, Equatable, Codable {
    public var timeZone: String?
    public var deliveryTime: LocalTime?
    public var quietHours: QuietHours?
    public var weekdays: Weekdays

    public init(
        timeZone: String? = nil,
        deliveryTime: LocalTime? = nil,
        quietHours: QuietHours? = nil,
        weekdays: Weekdays = .all
    ) {
        self.timeZone = timeZone
        self.deliveryTime = deliveryTime
        self.quietHours = quietHours
        self.weekdays = weekdays
    }
}

/// A subscriber. The same username in two tenants is two users.
public struct User: Sendable, Equatable {
    public var id: UserID
    public var tenant: TenantID
    public var username: String
    /// A bcrypt hash; never logged, never sent to a client.
    public var passwordHash: String
    public var language: String?
    public var lifeAreas: LifeAreaScores
    public var enabled: Bool
    public var preferences: DeliveryPreferences
    /// May use the tenant's admin pages (`/SendPush`).
    public var isAdmin: Bool
    public var createdAt: Date

    public init(
        id: UserID,
        tenant: TenantID,
        username: String,
        passwordHash: String,
        language: String?,
        lifeAreas: LifeAreaScores,
        enabled: Bool,
        preferences: DeliveryPreferences,
        isAdmin: Bool = false,
        createdAt: Date
    ) {
        self.id = id
        self.tenant = tenant
        self.username = username
        self.passwordHash = passwordHash
        self.language = language
        self.lifeAreas = lifeAreas
        self.enabled = enabled
        self.preferences = preferences
        self.isAdmin = isAdmin
        self.createdAt = createdAt
    }
}

/// What the admin supplies to create a user; the store assigns the id.
public struct NewUser: Sendable {
    public var tenant: TenantID
    public var username: String
    public var passwordHash: String
    public var language: String?
    public var lifeAreas: LifeAreaScores
    public var preferences: DeliveryPreferences
    public var isAdmin: Bool
    /// The first delivery is the first delivery time at or after this instant; nil: today's, when its time
    /// passed within the staleness limit (see ``FirstDelivery``).
    public var startsAt: Date?

    public init(
        tenant: TenantID,
        username: String,
        passwordHash: String,
        language: String? = nil,
        lifeAreas: LifeAreaScores = .neutral,
        preferences: DeliveryPreferences = .init(),
        isAdmin: Bool = false,
        startsAt: Date? = nil
    ) throws(EngineError) {
        try Self.validate(username: username)
        self.tenant = tenant
        self.username = username
        self.passwordHash = passwordHash
        self.language = try language.map { (code) throws(EngineError) in try validatedLanguage(code) }
        self.lifeAreas = lifeAreas
        self.preferences = preferences
        self.isAdmin = isAdmin
        self.startsAt = startsAt
    }

    /// A username may hold any printable characters but no `:` (Basic auth splits on the first one).
    public static func validate(username: String) throws(EngineError) {
        let printable = username.unicodeScalars.allSatisfy { !$0.properties.generalCategory.isControl }
        guard (1...128).contains(username.count), !username.contains(":"), printable else {
            throw EngineError(.invalidInput, "username must be 1-128 printable characters without ':'")
        }
    }
}

extension Unicode.GeneralCategory {
    var isControl: Bool {
        switch self {
        case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned: return true
        default: return false
        }
    }
}
