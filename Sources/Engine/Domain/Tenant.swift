import Foundation

/// A company running the programme for its staff. Every other row belongs to exactly one tenant.
public struct Tenant: Sendable, Equatable {
    public var id: TenantID
    public var name: String
    /// Language used when a user's own language has no impulse.
    public var defaultLanguage: String
    public var defaultTimeZone: String
    public var defaultDeliveryTime: LocalTime
    public var maxPushesPerDay: Int
    /// Quiet hours for users who set none of their own.
    public var defaultQuietHours: QuietHours?
    /// The programme's days: a user's own weekdays choose among them (all of them when the two do not meet).
    public var weekdays: Weekdays
    /// The APNs environment of tokens registered without one (nil: the broker's configuration decides).
    public var apnsEnvironment: APNsEnvironment?
    /// The APNs topic (the app's bundle id); device tokens are unique per tenant and topic.
    public var apnsTopic: String
    /// How long APNs keeps trying to reach an offline phone.
    public var pushExpiry: PushExpiry
    /// A suspended tenant gets no dispatch, and its users and admins are refused (403) until it is resumed.
    public var suspended: Bool
    /// Whether the tenant's own admins may manage its APNs credentials (an operator's decision; operators always
    /// may).
    public var adminsManageAPNsCredentials: Bool
    /// When users created through administration start: their next delivery time, or a welcome impulse.
    public var firstDelivery: FirstDelivery
    /// Learned delivery times (off unless the tenant turns them on).
    public var learnedTiming: LearnedTiming
    public var createdAt: Date

    public init(
        id: TenantID,
        name: String,
        defaultLanguage: String = "EN",
        defaultTimeZone: String = "Europe/Berlin",
        defaultDeliveryTime: LocalTime? = nil,
        maxPushesPerDay: Int = 1,
        defaultQuietHours: QuietHours? = nil,
        weekdays: Weekdays = .all,
        apnsEnvironment: APNsEnvironment? = nil,
        apnsTopic: String = "com.example.impulse",
        pushExpiry: PushExpiry = .endOfDay,
        suspended: Bool = false,
        adminsManageAPNsCredentials: Bool = false,
        firstDelivery: FirstDelivery = .nextDeliveryTime,
        learnedTiming: LearnedTiming = LearnedTiming(),
        createdAt: Date = Date()
    ) throws(EngineError) {
        guard !name.isEmpty, name.count <= 200 else {
            throw EngineError(.invalidInput, "tenant name must be 1-200 characters")
        }
        guard (1...24).contains(maxPushesPerDay) else {
            throw EngineError(.invalidInput, "max pushes per day must be 1-24")
        }
        guard !apnsTopic.isEmpty, apnsTopic.count <= 255 else {
            throw EngineError(.invalidInput, "APNs topic must be set")
        }
        self.id = id
        self.name = name
        self.defaultLanguage = try validatedLanguage(defaultLanguage)
        self.defaultTimeZone = try validatedTimeZone(defaultTimeZone)
        if let defaultDeliveryTime {
            self.defaultDeliveryTime = defaultDeliveryTime
        } else {
            self.defaultDeliveryTime = try LocalTime(hour: 8, minute: 0)
        }
        self.maxPushesPerDay = maxPushesPerDay
        self.defaultQuietHours = defaultQuietHours.flatMap { $0.start == $0.end ? nil : $0 }
        self.weekdays = weekdays
        self.apnsEnvironment = apnsEnvironment
        self.apnsTopic = apnsTopic
        self.pushExpiry = pushExpiry
        self.suspended = suspended
        self.adminsManageAPNsCredentials = adminsManageAPNsCredentials
        self.firstDelivery = firstDelivery
        self.learnedTiming = learnedTiming
        self.createdAt = createdAt
    }
}

extension Tenant {
    /// The environment a token is recorded for: the one its registration states, else the tenant's, else the
    /// broker's default for the route.
    public func tokenEnvironment(stated: APNsEnvironment?, default fallback: APNsEnvironment) -> APNsEnvironment {
        stated ?? apnsEnvironment ?? fallback
    }
}

/// A tenant's settings as an operator sets them: every member optional, those given replace the tenant's.
public struct TenantSettings: Sendable, Equatable, Decodable {
    public var name: String?
    public var defaultLanguage: String?
    public var defaultTimeZone: String?
    /// The default local delivery time, `HH:mm`.
    public var deliveryTime: String?
    public var maxPushesPerDay: Int?
    /// The default quiet hours; a window whose start is its end removes them.
    public var quietHours: QuietHours?
    /// The programme's days, 1 (Monday) to 7 (Sunday).
    public var weekdays: [Int]?
    /// `production` or `sandbox`: the environment of tokens registered without one.
    public var apnsEnvironment: String?
    public var apnsTopic: String?
    /// `end-of-day` or `immediate`.
    public var pushExpiry: String?
    public var suspended: Bool?
    /// Whether the tenant's admins may manage its APNs credentials (operators only set this).
    public var adminsManageAPNsCredentials: Bool?
    /// `next-delivery-time` or `immediate`: when users created through administration start.
    public var firstDelivery: String?
    /// Learned delivery times: any of `enabled`, `windowMinutes` and `holdoutShare`.
    public var learnedTiming: LearnedTimingChanges?

    public init(
        name: String? = nil,
        defaultLanguage: String? = nil,
        defaultTimeZone: String? = nil,
        deliveryTime: String? = nil,
        maxPushesPerDay: Int? = nil,
        quietHours: QuietHours? = nil,
        weekdays: [Int]? = nil,
        apnsEnvironment: String? = nil,
        apnsTopic: String? = nil,
        pushExpiry: String? = nil,
        suspended: Bool? = nil,
        adminsManageAPNsCredentials: Bool? = nil,
        firstDelivery: String? = nil,
        learnedTiming: LearnedTimingChanges? = nil
    ) {
        self.name = name
        self.defaultLanguage = defaultLanguage
        self.defaultTimeZone = defaultTimeZone
        self.deliveryTime = deliveryTime
        self.maxPushesPerDay = maxPushesPerDay
        self.quietHours = quietHours
        self.weekdays = weekdays
        self.apnsEnvironment = apnsEnvironment
        self.apnsTopic = apnsTopic
        self.pushExpiry = pushExpiry
        self.suspended = suspended
        self.adminsManageAPNsCredentials = adminsManageAPNsCredentials
        self.firstDelivery = firstDelivery
        self.learnedTiming = learnedTiming
    }

    /// Whether these settings touch only the programme (what its admins may change): not the name, the APNs
    /// environment or topic, suspension, or who manages APNs credentials.
    public var programmeOnly: Bool {
        name == nil && apnsEnvironment == nil && apnsTopic == nil && suspended == nil
            && adminsManageAPNsCredentials == nil
    }

    /// The tenant with these settings, checked as a new tenant's are; nothing changes if one is invalid.
    func apply(to tenant: inout Tenant, today: LocalDate) throws(EngineError) {
        let expiry = try pushExpiry.map { (text) throws(EngineError) -> PushExpiry in
            guard let value = PushExpiry(rawValue: text) else {
                throw EngineError(.invalidInput, "pushExpiry must be end-of-day or immediate")
            }
            return value
        }
        let environment = try apnsEnvironment.map { (text) throws(EngineError) -> APNsEnvironment in
            guard let value = APNsEnvironment(rawValue: text) else {
                throw EngineError(.invalidInput, "apnsEnvironment must be production or sandbox")
            }
            return value
        }
        let start = try firstDelivery.map { (text) throws(EngineError) in try FirstDelivery(parsing: text) }
        tenant = try Tenant(
            id: tenant.id,
            name: name ?? tenant.name,
            defaultLanguage: defaultLanguage ?? tenant.defaultLanguage,
            defaultTimeZone: defaultTimeZone ?? tenant.defaultTimeZone,
            defaultDeliveryTime: try deliveryTime.map { (text) throws(EngineError) in try LocalTime(parsing: text) }
                ?? tenant.defaultDeliveryTime,
            maxPushesPerDay: maxPushesPerDay ?? tenant.maxPushesPerDay,
            defaultQuietHours: quietHours ?? tenant.defaultQuietHours,
            weekdays: try weekdays.map { (days) throws(EngineError) in try Weekdays(days) } ?? tenant.weekdays,
            apnsEnvironment: environment ?? tenant.apnsEnvironment,
            apnsTopic: apnsTopic ?? tenant.apnsTopic,
            pushExpiry: expiry ?? tenant.pushExpiry,
            suspended: suspended ?? tenant.suspended,
            adminsManageAPNsCredentials: adminsManageAPNsCredentials ?? tenant.adminsManageAPNsCredentials,
            firstDelivery: start ?? tenant.firstDelivery,
            learnedTiming: try learnedTiming?.apply(to: tenant.learnedTiming, today: today) ?? tenant.learnedTiming,
            createdAt: tenant.createdAt
        )
    }
}

/// Changes to a tenant's learned delivery times: the members given replace the tenant's.
public struct LearnedTimingChanges: Sendable, Equatable, Decodable {
    public var enabled: Bool?
    /// How far from the stated time the impulse may move, either way: 30-360 minutes.
    public var windowMinutes: Int?
    /// The share of users kept on fixed times to measure the effect: 0-0.5.
    public var holdoutShare: Double?
    /// true: turns learning back on after the safety valve turned it off (it is judged again from the next
    /// Monday).
    public var resume: Bool?

    public init(enabled: Bool? = nil, windowMinutes: Int? = nil, holdoutShare: Double? = nil, resume: Bool? = nil) {
        self.enabled = enabled
        self.windowMinutes = windowMinutes
        self.holdoutShare = holdoutShare
        self.resume = resume
    }

    /// The settings with these changes, checked; nothing changes if one is invalid.
    public func apply(to timing: LearnedTiming, today: LocalDate) throws(EngineError) -> LearnedTiming {
        var timing = timing
        if let windowMinutes {
            guard LearnedTiming.windowRange.contains(windowMinutes) else {
                throw EngineError(.invalidInput, "learnedTiming.windowMinutes must be 30-360")
            }
            timing.windowMinutes = windowMinutes
        }
        if let holdoutShare {
            guard holdoutShare.isFinite, LearnedTiming.holdoutRange.contains(holdoutShare) else {
                throw EngineError(.invalidInput, "learnedTiming.holdoutShare must be 0-0.5")
            }
            timing.holdoutShare = holdoutShare
        }
        if let enabled { timing.enabled = enabled }
        if resume == true, timing.fallback != nil {
            timing.fallback = nil
            timing.watchFrom = LearnedTimingGuard.watchFrom(resumedOn: today)
        }
        return timing
    }
}
