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
    /// Until when APNs keeps trying an offline phone (the end of the user's delivery day); nil: once only.
    public var expiresAt: Date?

    public init(
        tenant: TenantID,
        delivery: DeliveryID,
        device: Device,
        title: String,
        badge: Int,
        impulse: ImpulseID,
        expiresAt: Date? = nil
    ) {
        self.tenant = tenant
        self.delivery = delivery
        self.device = device
        self.title = title
        self.badge = badge
        self.impulse = impulse
        self.collapseID = "impulse-\(delivery.rawValue)"
        self.expiresAt = expiresAt
    }
}

/// Sends pushes to APNs (or its simulator). Implemented at the edge (Gateway); doubles in Engine tests.
public protocol PushTransport: Sendable {
    /// Sends one push; every failure is a `PushResult`, never a thrown error.
    func send(_ push: OutboundPush) async -> PushResult
    /// Sends several pushes (to one or more tenants); answers in the order given. Transports that can share a
    /// hop and a write among pushes implement it; the default sends them one by one, concurrently.
    ///
    /// `onAnswer` may run once per push as its answer comes, before this returns, with the push's index and,
    /// when APNs accepted it, the apns-id: the gateway then gives that push's in-flight place back, and records an
    /// accepted push, at once instead of after the batch's slowest answer. A transport that never calls it is
    /// correct, only slower to free places and to make outcomes durable.
    func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer]
    /// Makes fresh provider credentials for the tenant and retires its connections (after ExpiredProviderToken).
    func renewCredentials(tenant: TenantID) async
    /// Renews the tenant's credential on one channel only (the one whose answer said it expired). A transport of
    /// one channel renews its own (the default).
    func renewCredentials(tenant: TenantID, channel: PushChannel) async
}

/// A push's result and how long APNs took to give it.
public struct PushAnswer: Sendable {
    public var result: PushResult
    public var latency: Duration

    public init(result: PushResult, latency: Duration) {
        self.result = result
        self.latency = latency
    }
}

extension PushTransport {
    public func renewCredentials(tenant: TenantID, channel: PushChannel) async {
        await renewCredentials(tenant: tenant)
    }

    public func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        await withTaskGroup(of: (Int, PushAnswer).self) { group in
            for (index, push) in pushes.enumerated() {
                group.addTask {
                    let started = ContinuousClock.now
                    let result = await send(push)
                    if case .accepted(let apnsID) = result { onAnswer(index, apnsID) } else { onAnswer(index, nil) }
                    return (index, PushAnswer(result: result, latency: started.duration(to: .now)))
                }
            }
            var answers = [PushAnswer?](repeating: nil, count: pushes.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers.map { $0! }
        }
    }
}

/// What a push needs besides the delivery, read ahead for a batch: the user's devices and the badge.
///
/// The badge is the unread count when the batch was read; a read in the moments before the push makes it one too
/// high until the next push, which the app corrects when it fetches. It is counted only for a user with a device
/// (0 without one): nothing is pushed without a device.
public struct PushTarget: Sendable, Equatable {
    public var devices: [Device]
    public var unreadCount: Int
    /// The user's own time zone; nil: the tenant's default.
    public var timeZone: String?

    public init(devices: [Device], unreadCount: Int, timeZone: String? = nil) {
        self.devices = devices
        self.unreadCount = unreadCount
        self.timeZone = timeZone
    }
}
