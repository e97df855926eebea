import Engine
import Foundation

/// One impulse in the original `CurrentImpulse` format: exactly these members, with these types.
struct ImpulseItem: Encodable, Equatable, Sendable {
    var item: DeliveredImpulse
    var baseURL: String

    enum CodingKeys: String, CodingKey {
        case single, soundURL, imageURLs, timestamp, duration, title, description, webURL, action, language,
            descriptionShort, workingID, videoURL
    }

    func encode(to encoder: any Encoder) throws {
        let omitNulls = encoder.userInfo[Representation.omitNullsKey] as? Bool ?? false
        let impulse = item.impulse
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(impulse.single, forKey: .single)
        try container.encodeNullable(String?.none, forKey: .soundURL, omitNulls: omitNulls)
        try container.encode(impulse.imageURLs.map { absoluteURL($0, base: baseURL) }, forKey: .imageURLs)
        try container.encode(Int64(item.delivery.assignedAt.timeIntervalSince1970), forKey: .timestamp)
        try container.encode(impulse.durationMinutes, forKey: .duration)
        try container.encode(impulse.title, forKey: .title)
        try container.encode(impulse.description, forKey: .description)
        try container.encodeNullable(
            impulse.webURL.map { absoluteURL($0, base: baseURL) },
            forKey: .webURL,
            omitNulls: omitNulls
        )
        try container.encode(impulse.action.rawValue, forKey: .action)
        try container.encode(impulse.language, forKey: .language)
        try container.encode(impulse.descriptionShort, forKey: .descriptionShort)
        try container.encode(impulse.id.rawValue, forKey: .workingID)
        try container.encodeNullable(
            impulse.videoURL.map { absoluteURL($0, base: baseURL) },
            forKey: .videoURL,
            omitNulls: omitNulls
        )
    }
}

/// `{"items": [...]}`, the original list envelope.
struct ImpulseList: Encodable, Equatable, Sendable {
    var items: [ImpulseItem]
}

/// An impulse in the versioned API: the original members plus the delivery's state.
struct DeliveryItem: Encodable, Sendable {
    var item: DeliveredImpulse
    var baseURL: String

    enum CodingKeys: String, CodingKey {
        case sequence, kind, assignedAt, pushedAt, channels, fetchedAt, readAt, read, impulse, lifeArea, series
        case seriesPosition
    }

    func encode(to encoder: any Encoder) throws {
        let omitNulls = encoder.userInfo[Representation.omitNullsKey] as? Bool ?? false
        let delivery = item.delivery
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(delivery.id.rawValue, forKey: .sequence)
        try container.encode(delivery.kind.rawValue, forKey: .kind)
        try container.encode(Int64(delivery.assignedAt.timeIntervalSince1970), forKey: .assignedAt)
        try container.encodeNullable(
            delivery.pushedAt.map { Int64($0.timeIntervalSince1970) },
            forKey: .pushedAt,
            omitNulls: omitNulls
        )
        try container.encode(delivery.channels.channels.map(\.rawValue), forKey: .channels)
        try container.encodeNullable(
            delivery.fetchedAt.map { Int64($0.timeIntervalSince1970) },
            forKey: .fetchedAt,
            omitNulls: omitNulls
        )
        try container.encodeNullable(
            delivery.readAt.map { Int64($0.timeIntervalSince1970) },
            forKey: .readAt,
            omitNulls: omitNulls
        )
        try container.encode(delivery.isRead, forKey: .read)
        try container.encode(ImpulseItem(item: item, baseURL: baseURL), forKey: .impulse)
        try container.encode(item.impulse.lifeArea.rawValue, forKey: .lifeArea)
        try container.encodeNullable(item.impulse.series, forKey: .series, omitNulls: omitNulls)
        try container.encodeNullable(item.impulse.seriesPosition, forKey: .seriesPosition, omitNulls: omitNulls)
    }
}

/// A page of the versioned list.
struct DeliveryPage: Encodable {
    var items: [DeliveryItem]
    var unreadCount: Int
    /// The path of the next (older) page, when there may be one.
    var next: String?

    enum CodingKeys: String, CodingKey { case items, unreadCount, next }

    func encode(to encoder: any Encoder) throws {
        let omitNulls = encoder.userInfo[Representation.omitNullsKey] as? Bool ?? false
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(items, forKey: .items)
        try container.encode(unreadCount, forKey: .unreadCount)
        try container.encodeNullable(next, forKey: .next, omitNulls: omitNulls)
    }
}

/// Makes a `/media/...` path absolute; leaves absolute URLs alone.
func absoluteURL(_ url: String, base: String) -> String {
    url.hasPrefix("/") ? base + url : url
}
