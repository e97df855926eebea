import Foundation

/// What a batch of marks changed, as each store's statements return the rows they changed: the reports' tally and,
/// when an endpoint listens, the webhook events to queue in the same transaction. Both stores fill it the same way.
struct MarkEffects {
    enum Change {
        case pushed(apnsID: String?, channels: PushChannels)
        /// A delivery counted as pushed before was accepted on further channels (device by device).
        case pushedOn(channels: PushChannels)
        case failed(noDevice: Bool)
        case fetched
        /// `channels`: those its push went out on.
        case read(pushedAt: Date?, readAt: Date, channels: PushChannels)
    }

    private(set) var tally = EngagementTally()
    let subscriptions: WebhookSubscriptions
    private var intents: [(event: WebhookEvent, tenant: TenantID, data: [String: String?], user: Int64, at: Date)] = []

    init(subscriptions: WebhookSubscriptions) {
        self.subscriptions = subscriptions
    }

    /// One delivery's row changed by a mark.
    mutating func changed(
        _ change: Change,
        tenant: TenantID,
        day: String,
        impulse: ImpulseID,
        delivery: Int64,
        user: Int64,
        at: Date
    ) {
        let event: WebhookEvent?
        var data: [String: String?] = ["deliveryID": String(delivery), "impulseID": impulse.rawValue]
        switch change {
        case .pushed(let apnsID, let channels):
            tally.pushed(tenant: tenant, day: day, impulse: impulse, channels: channels)
            (event, data["apnsID"], data["channels"]) = (.deliveryPushed, apnsID, channels.description)
        case .pushedOn(let channels):
            tally.pushedOn(tenant: tenant, day: day, impulse: impulse, channels: channels)
            event = nil
        case .failed(let noDevice):
            tally.count(noDevice ? \.noDevice : \.failed, tenant: tenant, day: day, impulse: impulse)
            (event, data["reason"]) = (.deliveryFailed, noDevice ? "no-device" : "rejected")
        case .fetched:
            tally.count(\.fetched, tenant: tenant, day: day, impulse: impulse)
            event = nil
        case .read(let pushedAt, let readAt, let channels):
            tally.read(
                tenant: tenant,
                day: day,
                impulse: impulse,
                pushedAt: pushedAt,
                readAt: readAt,
                channels: channels
            )
            event = .deliveryRead
        }
        if let event, subscriptions.contains(tenant, event) {
            intents.append((event, tenant, data, user, at))
        }
    }

    /// The users the events name, to look up.
    var users: Set<Int64> { Set(intents.map(\.user)) }

    /// The events, in the order of the changes, each naming its user.
    func records(usernames: [Int64: String]) -> [WebhookEventRecord] {
        intents.map { intent in
            var data = intent.data
            data["user"] = usernames[intent.user]
            return WebhookEventRecord(
                tenant: intent.tenant,
                event: intent.event,
                orderingKey: "user:\(intent.user)",
                data: data,
                at: intent.at
            )
        }
    }
}

/// A progress mark applied to a delivery's row (``DeliveryMark/Kind/progress``), the same in both stores: the row's
/// new push columns from its old ones, and what the change tells the reports.
struct DeliveryProgress {
    /// The row's new `pushed_at`: its first accepted push's time.
    let pushedAt: Double?
    let storedChannels: Int?
    /// The devices with their outcome, while others wait (nil once settled: nothing more is pushed).
    let storedDevices: String?
    let settledAt: Double?
    let changes: [MarkEffects.Change]

    init(
        pushedAt old: Double?,
        channels oldChannels: Int?,
        devices oldDevices: String?,
        mark: (apnsID: String?, channels: PushChannels, devices: [String], settles: Bool),
        at: Double
    ) {
        let before = PushChannels(rawValue: oldChannels ?? 0)
        let after = before.union(mark.channels)
        pushedAt = old ?? (mark.apnsID == nil ? nil : at)
        storedChannels = after.isEmpty ? oldChannels : after.rawValue
        storedDevices =
            mark.settles
            ? nil : Delivery.storedDevices(Delivery.pushedDevices(stored: oldDevices).union(mark.devices))
        settledAt = mark.settles ? at : nil
        var changes: [MarkEffects.Change] = []
        if old == nil, pushedAt != nil {
            changes.append(.pushed(apnsID: mark.apnsID, channels: after))
        } else if old != nil, !after.subtracting(before).isEmpty {
            changes.append(.pushedOn(channels: after.subtracting(before)))
        }
        if mark.settles, pushedAt == nil { changes.append(.failed(noDevice: false)) }
        self.changes = changes
    }
}
