import Foundation

/// One push to one device, as the push gateway hands it to the transport.
public struct OutboundPush: Sendable, Equatable {
    public var tenant: TenantID
    public var delivery: DeliveryID
    public var device: Device
    /// The impulse's short title (the alert).
    public var title: String
    /// The user's true unread count.
    public var badge: Int
    public var impulse: ImpulseID
    /// Stable per delivery and device: a resend replaces the first on the device instead of showing twice.
    public var collapseID: String

    public init(tenant: TenantID, delivery: DeliveryID, device: Device, title: String, badge: Int, impulse: ImpulseID) {
        self.tenant = tenant
        self.delivery = delivery
        self.device = device
        self.title = title
        self.badge = badge
        self.impulse = impulse
        self.collapseID = "impulse-\(delivery.rawValue)"
    }
}

/// Sends pushes to APNs (or its simulator). Implemented at the edge (Gateway); doubles in Engine tests.
public protocol PushTransport: Sendable {
    /// Sends one push; every failure is a `PushResult`, never a thrown error.
    func send(_ push: OutboundPush) async -> PushResult
    /// Makes fresh provider credentials for the tenant and retires its connections (after ExpiredProviderToken).
    func renewCredentials(tenant: TenantID) async
}

/// What a push needs besides the delivery, read ahead for a batch: the user's devices and the badge.
///
/// The badge is the unread count when the batch was read; a read in the moments before the push makes it one too
/// high until the next push, which the app corrects when it fetches.
public struct PushTarget: Sendable, Equatable {
    public var devices: [Device]
    public var unreadCount: Int

    public init(devices: [Device], unreadCount: Int) {
        self.devices = devices
        self.unreadCount = unreadCount
    }
}
