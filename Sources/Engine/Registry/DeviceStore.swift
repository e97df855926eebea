import Foundation

/// Device tokens and their one owner: the token registry's port.
public protocol DeviceStore: Sendable {
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
    /// The tenant's devices counted per topic and environment: registered, quarantined, removed (awaiting the
    /// purge). One pass over the tenant's rows.
    func deviceTallies(tenant: TenantID) async throws -> [DeviceTally]
}

/// A tenant's devices of one topic and environment, by state.
public struct DeviceTally: Sendable, Equatable {
    public var channel: PushChannel
    public var topic: String
    public var environment: APNsEnvironment
    /// Registered, pushes go to them.
    public var active: Int
    /// APNs called the token bad or of the other environment: no pushes until registered again.
    public var quarantined: Int
    /// APNs said the app is gone: invisible, deleted by the next purge.
    public var removed: Int

    public init(
        channel: PushChannel = .apns,
        topic: String,
        environment: APNsEnvironment,
        active: Int,
        quarantined: Int,
        removed: Int
    ) {
        self.channel = channel
        self.topic = topic
        self.environment = environment
        self.active = active
        self.quarantined = quarantined
        self.removed = removed
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
