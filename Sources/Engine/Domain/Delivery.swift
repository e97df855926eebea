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
    public var apnsID: String?
    public var fetchedAt: Date?
    public var readAt: Date?
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
        fetchedAt: Date? = nil,
        readAt: Date? = nil
    ) {
        self.id = id
        self.tenant = tenant
        self.user = user
        self.impulse = impulse
        self.kind = kind
        self.localDate = localDate
        self.assignedAt = assignedAt
        self.pushedAt = pushedAt
        self.apnsID = apnsID
        self.fetchedAt = fetchedAt
        self.readAt = readAt
    }

    public var isRead: Bool { readAt != nil }
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

    public init(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        kind: DeliveryKind,
        localDate: String? = nil,
        assignedAt: Date,
        awaitsPush: Bool = false
    ) {
        self.tenant = tenant
        self.user = user
        self.impulse = impulse
        self.kind = kind
        self.localDate = localDate
        self.assignedAt = assignedAt
        self.awaitsPush = awaitsPush
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
        /// APNs accepted the push for at least one of the user's devices (this also settles it).
        case pushed(apnsID: String)
        /// The push gateway is done with the delivery without an accepted push (no device, rejected, dropped):
        /// it is not pushed again after a restart.
        case settled
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
