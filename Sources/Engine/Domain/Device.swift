import Foundation

/// Which APNs environment a token was issued for.
public enum APNsEnvironment: String, Sendable, Codable, CaseIterable {
    case production, sandbox
}

/// The push service a device is reached through: Apple's (iPhones) or Firebase Cloud Messaging (Android).
public enum PushChannel: String, Sendable, Codable, CaseIterable {
    case apns, fcm
}

/// The channels that accepted a delivery's push (an iPhone's, an Android phone's, or both), kept with the delivery
/// as a small integer: APNs 1, FCM 2.
public struct PushChannels: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int

    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    public init(_ channel: PushChannel) {
        switch channel {
        case .apns: self = .apns
        case .fcm: self = .fcm
        }
    }

    public static let apns = PushChannels(rawValue: 1)
    public static let fcm = PushChannels(rawValue: 2)

    /// A delivery's stored channels: a pushed delivery without any was pushed by a release before FCM, which
    /// pushed to APNs only.
    public init(stored: Int?, pushed: Bool) {
        self = stored.map(PushChannels.init(rawValue:)) ?? (pushed ? .apns : [])
    }

    /// In ``PushChannel``'s order.
    public var channels: [PushChannel] { PushChannel.allCases.filter { contains(PushChannels($0)) } }

    /// `apns`, `fcm` or `apns,fcm`; empty when no channel is known (a delivery pushed by an earlier release).
    public var description: String { channels.map(\.rawValue).joined(separator: ",") }
}

/// A device token with its one owner.
public struct Device: Sendable, Equatable {
    public var tenant: TenantID
    /// How the device is reached; its token's form depends on it (``DeviceToken``).
    public var channel: PushChannel
    public var topic: String
    public var token: DeviceToken
    public var owner: UserID
    public var name: String
    public var environment: APNsEnvironment
    /// Refreshed on every registration: APNs' 410 timestamp is compared with it.
    public var registeredAt: Date
    /// Set when APNs called the token malformed (BadDeviceToken); no pushes go to it until it is registered again.
    public var quarantinedAt: Date?

    public init(
        tenant: TenantID,
        topic: String,
        token: DeviceToken,
        owner: UserID,
        name: String,
        environment: APNsEnvironment,
        registeredAt: Date,
        quarantinedAt: Date? = nil,
        channel: PushChannel = .apns
    ) throws(EngineError) {
        // Counting UTF-8 bytes first: a name of at most 200 bytes has at most 200 characters.
        guard name.utf8.count <= 200 || name.count <= 200 else {
            throw EngineError(.invalidInput, "device name must be at most 200 characters")
        }
        // A NUL used to cut the stored name short while the answer said 204; other controls do not belong in a
        // name an app shows either.
        guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) }) else {
            throw EngineError(.invalidInput, "device name must not contain control characters")
        }
        self.tenant = tenant
        self.channel = channel
        self.topic = topic
        self.token = token
        self.owner = owner
        self.name = name
        self.environment = environment
        self.registeredAt = registeredAt
        self.quarantinedAt = quarantinedAt
    }
}

/// What a registration did.
public enum DeviceRegistration: Sendable, Equatable {
    /// The token was new.
    case created
    /// The token was already this user's; name, environment and timestamp were refreshed.
    case refreshed
    /// The token belonged to another user of the tenant and now belongs to this one.
    case moved(from: UserID)
}
