import Engine
import Foundation

/// `GET /v1/me`: who I am, my unread count and my delivery preferences with the tenant's defaults filled in, by
/// the scheduler's own rule (``DailySchedule``): what the app shows is what the scheduler applies.
struct ProfileBody: Encodable {
    struct Preferences: Encodable {
        var timeZone: String
        var deliveryTime: String
        var quietHours: QuietHours?
        var weekdays: [Int]
        var maxPushesPerDay: Int
    }

    var username: String
    var tenant: String
    var language: String
    var unreadCount: Int
    var lifeAreas: [String: Int]
    var preferences: Preferences

    init(user: User, tenant: Tenant, unreadCount: Int) {
        self.username = user.username
        self.tenant = tenant.id.rawValue
        self.language = user.language ?? tenant.defaultLanguage
        self.unreadCount = unreadCount
        self.lifeAreas = Dictionary(uniqueKeysWithValues: LifeArea.allCases.map { ($0.rawValue, user.lifeAreas[$0]) })
        let schedule = DailySchedule(user: user.id, tenant: tenant, preferences: user.preferences, spreadWindow: .zero)
        self.preferences = Preferences(
            timeZone: schedule.timeZone.identifier,
            deliveryTime: schedule.deliveryTime.description,
            quietHours: schedule.quietHours,
            weekdays: schedule.weekdays.days,
            maxPushesPerDay: tenant.maxPushesPerDay
        )
    }
}

/// `PUT /v1/me/preferences`: the whole preference set; a missing member resets it to the tenant's default.
struct PreferencesUpdate: Decodable {
    var language: String?
    var timeZone: String?
    var deliveryTime: LocalTime?
    var quietHours: QuietHours?
    var weekdays: Weekdays?

    func validated() throws(EngineError) -> (language: String?, preferences: DeliveryPreferences) {
        let language = try language.map { (code) throws(EngineError) in try validatedLanguage(code) }
        let timeZone = try timeZone.map { (zone) throws(EngineError) in try validatedTimeZone(zone) }
        return (
            language,
            DeliveryPreferences(
                timeZone: timeZone,
                deliveryTime: deliveryTime,
                quietHours: quietHours,
                weekdays: weekdays ?? .all
            )
        )
    }
}

/// `POST /RegisterToken` (original) body.
struct RegisterTokenBody: Decodable {
    var DeviceToken: String
    var DeviceName: String
}

/// `PUT /v1/devices/{token}` body.
struct DeviceBody: Decodable {
    var name: String
    /// APNs only: the app build's environment.
    var environment: APNsEnvironment?
    /// `apns` (the default) or `fcm` (an Android app's registration token or Firebase Installation ID).
    var platform: PushChannel?
}

/// A device in `GET /v1/devices`.
struct DeviceView: Encodable {
    var token: String
    var name: String
    var environment: String
    var platform: String
    var registeredAt: Int64

    init(_ device: Device) {
        self.token = device.token.rawValue
        self.name = device.name
        self.environment = device.environment.rawValue
        self.platform = device.channel.rawValue
        self.registeredAt = Int64(device.registeredAt.timeIntervalSince1970)
    }
}

struct DeviceList: Encodable {
    var devices: [DeviceView]
}
