import Engine
import Foundation

/// RFC 3339 in UTC, as every time of the admin API is written.
func rfc3339(_ date: Date) -> String {
    date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false).timeZone(separator: .omitted))
}

/// A tenant as the admin API shows it.
struct TenantBody: Encodable, Sendable {
    var id: String
    var name: String
    var defaultLanguage: String
    var defaultTimeZone: String
    var deliveryTime: String
    var maxPushesPerDay: Int
    var quietHours: QuietHours?
    var weekdays: [Int]
    var apnsEnvironment: String?
    var apnsTopic: String
    var pushExpiry: String
    var suspended: Bool
    var adminsManageAPNsCredentials: Bool
    var firstDelivery: String
    var learnedTiming: LearnedTiming.Settings
    var createdAt: String

    init(_ tenant: Tenant) {
        id = tenant.id.rawValue
        name = tenant.name
        defaultLanguage = tenant.defaultLanguage
        defaultTimeZone = tenant.defaultTimeZone
        deliveryTime = tenant.defaultDeliveryTime.description
        maxPushesPerDay = tenant.maxPushesPerDay
        quietHours = tenant.defaultQuietHours
        weekdays = tenant.weekdays.days
        apnsEnvironment = tenant.apnsEnvironment?.rawValue
        apnsTopic = tenant.apnsTopic
        pushExpiry = tenant.pushExpiry.rawValue
        suspended = tenant.suspended
        adminsManageAPNsCredentials = tenant.adminsManageAPNsCredentials
        firstDelivery = tenant.firstDelivery.rawValue
        learnedTiming = tenant.learnedTiming.settings
        createdAt = rfc3339(tenant.createdAt)
    }
}

/// `POST /admin/v1/tenants`: the id and any settings.
struct NewTenantBody: Decodable {
    var id: TenantID
    var settings: TenantSettings

    enum CodingKeys: String, CodingKey { case id }

    init(from decoder: any Decoder) throws {
        id = try decoder.container(keyedBy: CodingKeys.self).decode(TenantID.self, forKey: .id)
        settings = try TenantSettings(from: decoder)
    }
}

/// A user as the admin API shows it: never a password hash.
struct AdminUserBody: Encodable, Sendable {
    struct Preferences: Encodable, Sendable {
        var timeZone: String?
        var deliveryTime: String?
        var quietHours: QuietHours?
        var weekdays: [Int]
    }

    var username: String
    var language: String?
    var lifeAreas: [String: Int]
    var enabled: Bool
    var admin: Bool
    var preferences: Preferences
    var createdAt: String

    init(_ user: User) {
        username = user.username
        language = user.language
        lifeAreas = Dictionary(uniqueKeysWithValues: LifeArea.allCases.map { ($0.rawValue, user.lifeAreas[$0]) })
        enabled = user.enabled
        admin = user.isAdmin
        preferences = Preferences(
            timeZone: user.preferences.timeZone,
            deliveryTime: user.preferences.deliveryTime?.description,
            quietHours: user.preferences.quietHours,
            weekdays: user.preferences.weekdays.days
        )
        createdAt = rfc3339(user.createdAt)
    }
}

/// A page of a list, with the query that fetches the next one (nil on the last page).
struct PageBody<Item: Encodable & Sendable>: Encodable, Sendable {
    var items: [Item]
    var next: String?
}

/// `PUT .../users/{username}/learned-time` and `PUT /v1/me/learned-time`: whether a delivery time the user set
/// themselves may be learned.
struct LearnedTimeOptIn: Decodable {
    var optedIn: Bool
}

/// `PUT .../users/{username}/password`.
struct PasswordBody: Decodable {
    var password: String
}

/// `POST /admin/v1/operators`.
struct NewOperatorBody: Decodable {
    var name: String
    var password: String
}

struct OperatorBody: Encodable, Sendable {
    var name: String
    var createdAt: String
}

/// What an erasure removed.
struct ErasureBody: Encodable, Sendable {
    var erased: ErasureReport
}

/// A line of the audit trail.
struct AuditBody: Encodable, Sendable {
    var id: Int64
    var at: String
    var actor: String
    var role: String
    var tenant: String?
    var action: String
    var target: String
    var requestId: String?

    init(_ entry: AuditEntry) {
        id = entry.id
        at = rfc3339(entry.at)
        actor = entry.actor
        role = entry.role.rawValue
        tenant = entry.tenant?.rawValue
        action = entry.action
        target = entry.target
        requestId = entry.requestID
    }
}
