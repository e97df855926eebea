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
    /// The APNs topic (the app's bundle id); device tokens are unique per tenant and topic.
    public var apnsTopic: String
    /// How long APNs keeps trying to reach an offline phone.
    public var pushExpiry: PushExpiry
    public var createdAt: Date

    public init(
        id: TenantID,
        name: String,
        defaultLanguage: String = "EN",
        defaultTimeZone: String = "Europe/Berlin",
        defaultDeliveryTime: LocalTime? = nil,
        maxPushesPerDay: Int = 1,
        apnsTopic: String = "com.example.impulse",
        pushExpiry: PushExpiry = .endOfDay,
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
        self.apnsTopic = apnsTopic
        self.pushExpiry = pushExpiry
        self.createdAt = createdAt
    }
}
