import Foundation

/// Why a delivery exists.
public enum DeliveryKind: String, Sendable, Codable {
    /// The daily impulse; at most one per user and local date.
    case scheduled
    /// Sent by an operator.
    case manual
    /// Asked for by the user.
    case reminder
}

/// One impulse assigned to one user: the ledger's row.
public struct Delivery: Sendable, Equatable {
    public var id: DeliveryID
    public var tenant: TenantID
    public var user: UserID
    public var impulse: ImpulseID
    public var kind: DeliveryKind
    /// The user's local date (`yyyy-MM-dd`) for scheduled deliveries.
    public var localDate: String?
    public var assignedAt: Date
    public var pushedAt: Date?
    /// The id the push service answered the first accepted push with (APNs' apns-id, or FCM's message name).
    public var apnsID: String?
    /// The channels that accepted its push; empty when unpushed, or pushed by a release that did not record them.
    public var channels: PushChannels
    /// The devices (tokens) whose push already has its outcome while others of the user's wait (a channel that kept
    /// failing): a later push of the delivery goes only to the others. Empty for nearly every delivery; nil when
    /// not known here (a delivery requeued in memory), so that the push gateway reads it from the store.
    public var pushedDevices: Set<String>?
    public var fetchedAt: Date?
    public var readAt: Date?
    /// The day the reports count it on: the local date for a scheduled delivery, else the tenant's date when it
    /// was assigned (see ``EngagementCounts``). Kept for deliveries just recorded; others read back hold the local
    /// or UTC date.
    public var reportDay: String
    /// When the delivery became due (the scheduled fire time or the reminder's time); in memory only, for the
    /// dispatch-lag metric. Nil for deliveries read back from the store.
    public var dueAt: Date?

    public init(
        id: DeliveryID,
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        kind: DeliveryKind,
        localDate: String?,
        assignedAt: Date,
        pushedAt: Date? = nil,
        apnsID: String? = nil,
        channels: PushChannels = [],
        pushedDevices: Set<String>? = [],
        fetchedAt: Date? = nil,
        readAt: Date? = nil,
        reportDay: String? = nil
    ) {
        self.reportDay =
            reportDay ?? localDate ?? LocalDate(instant: assignedAt.timeIntervalSince1970, offsetSeconds: 0).description
        self.id = id
        self.tenant = tenant
        self.user = user
        self.impulse = impulse
        self.kind = kind
        self.localDate = localDate
        self.assignedAt = assignedAt
        self.pushedAt = pushedAt
        self.apnsID = apnsID
        self.channels = channels
        self.pushedDevices = pushedDevices
        self.fetchedAt = fetchedAt
        self.readAt = readAt
    }

    public var isRead: Bool { readAt != nil }

    /// `pushedDevices` as the stores keep it: the tokens one per line (tokens hold no line breaks), sorted; nil
    /// for none.
    public static func storedDevices(_ devices: Set<String>) -> String? {
        devices.isEmpty ? nil : devices.sorted().joined(separator: "\n")
    }

    /// The stored form back as a set.
    public static func pushedDevices(stored: String?) -> Set<String> {
        guard let stored, !stored.isEmpty else { return [] }
        return Set(stored.split(separator: "\n").map(String.init))
    }
}

/// An assignment the ledger is asked to record.
public struct NewDelivery: Sendable, Equatable {
    public var tenant: TenantID
    public var user: UserID
    public var impulse: ImpulseID
    public var kind: DeliveryKind
    public var localDate: String?
    public var assignedAt: Date
    /// Whether the push gateway will push it: such a delivery stays "unsettled" until the gateway is done with
    /// it, and an unsettled delivery is pushed again after a restart.
    public var awaitsPush: Bool
    /// The day the reports count it on: the local date for a scheduled delivery; for another, the tenant's date
    /// at `assignedAt` (``reportDay(assignedAt:zone:)``), which its maker passes (the UTC date if it does not).
    public var reportDay: String

    public init(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        kind: DeliveryKind,
        localDate: String? = nil,
        assignedAt: Date,
        awaitsPush: Bool = false,
        reportDay: String? = nil
    ) {
        self.reportDay =
            reportDay ?? localDate ?? LocalDate(instant: assignedAt.timeIntervalSince1970, offsetSeconds: 0).description
        self.tenant = tenant
        self.user = user
        self.impulse = impulse
        self.kind = kind
        self.localDate = localDate
        self.assignedAt = assignedAt
        self.awaitsPush = awaitsPush
    }
}

extension NewDelivery {
    /// The tenant's date at an instant: the report day of a delivery that is not for a local date.
    public static func reportDay(assignedAt: Date, zone identifier: String) -> String {
        let zone = TimeZone(identifier: identifier) ?? TimeZone(secondsFromGMT: 0) ?? .current
        return LocalDate(instant: assignedAt.timeIntervalSince1970, offsetSeconds: zone.secondsFromGMT(for: assignedAt))
            .description
    }
}

/// A delivery together with the impulse it carries: what the REST API shows.
public struct DeliveredImpulse: Sendable, Equatable {
    public var delivery: Delivery
    public var impulse: Impulse

    public init(delivery: Delivery, impulse: Impulse) {
        self.delivery = delivery
        self.impulse = impulse
    }
}

/// A state change of a delivery, written in batches.
public struct DeliveryMark: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case fetched, read
        /// A push service accepted the push for at least one of the user's devices (this also settles it):
        /// `apnsID` is the first accepted push's id, `channels` the channels that accepted one.
        case pushed(apnsID: String, channels: PushChannels)
        /// The push gateway is done with the delivery without an accepted push (rejected, dropped): it is not
        /// pushed again after a restart.
        case settled
        /// As `settled`, for a user without a device to push to.
        case noDevice
        /// Progress on a delivery pushed to several devices, one at a time: `devices` (tokens) have their outcome,
        /// `apnsID` (when one of them was accepted) and `channels` say what was accepted. With `settles` every device
        /// of the user now has its outcome and the delivery is settled; without, the others still wait (a channel
        /// that kept failing) and a later push goes to them alone. The reports count the delivery as pushed once,
        /// at its first accepted device, and each channel once.
        case progress(apnsID: String?, channels: PushChannels, devices: [String], settles: Bool)
    }
    public var tenant: TenantID
    public var delivery: DeliveryID
    public var kind: Kind
    public var at: Date

    public init(tenant: TenantID, delivery: DeliveryID, kind: Kind, at: Date) {
        self.tenant = tenant
        self.delivery = delivery
        self.kind = kind
        self.at = at
    }
}
