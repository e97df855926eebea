import Foundation

/// Sends each push over its device's channel: one transport per channel, behind the one `PushTransport` the push
/// gateway knows. A batch is split by channel, its parts are sent concurrently, and their answers (and each
/// `onAnswer`) come back at the batch's own indexes.
///
/// A push for a channel this node has no transport for is refused with `ChannelRouter.notConfigured`: a refused
/// payload, which drops that device's push, keeps the device, says nothing of the node's health, and is logged
/// with the tenant's other refusals (the first at once, then once a minute). The tenant's other devices and
/// channels go on.
public struct ChannelRouter: PushTransport {
    /// The reason a push for a channel without a transport is refused with.
    public static let notConfigured = "ChannelNotConfigured"

    public let transports: [PushChannel: any PushTransport]

    public init(_ transports: [PushChannel: any PushTransport]) {
        self.transports = transports
    }

    public func send(_ push: OutboundPush) async -> PushResult {
        guard let transport = transports[push.device.channel] else { return Self.refusal(push.device.channel) }
        return await transport.send(push)
    }

    public func send(
        batch pushes: [OutboundPush],
        onAnswer: @escaping @Sendable (_ index: Int, _ acceptedID: String?) -> Void
    ) async -> [PushAnswer] {
        let parts = Self.split(pushes)
        // Nearly every batch is of one channel: handed on as it is, without copying.
        if parts.count == 1, let (channel, _) = parts.first, let transport = transports[channel] {
            return await transport.send(batch: pushes, onAnswer: onAnswer)
        }
        var answers = [PushAnswer?](repeating: nil, count: pushes.count)
        await withTaskGroup(of: (indexes: [Int], answers: [PushAnswer]).self) { group in
            for (channel, indexes) in parts {
                guard let transport = transports[channel] else {
                    let refused = PushAnswer(result: Self.refusal(channel), latency: .zero)
                    for index in indexes {
                        answers[index] = refused
                        onAnswer(index, nil)
                    }
                    continue
                }
                let part = indexes.map { pushes[$0] }
                group.addTask {
                    let answers = await transport.send(batch: part) { position, acceptedID in
                        onAnswer(indexes[position], acceptedID)
                    }
                    return (indexes, answers)
                }
            }
            for await part in group {
                for (index, answer) in zip(part.indexes, part.answers) { answers[index] = answer }
            }
        }
        return answers.map {
            $0 ?? PushAnswer(result: .transportFailure(description: "no answer", resendable: true), latency: .zero)
        }
    }

    /// Renews the tenant's credentials on every channel.
    public func renewCredentials(tenant: TenantID) async {
        for transport in transports.values { await transport.renewCredentials(tenant: tenant) }
    }

    /// Renews the tenant's credential on the channel whose answer said it expired, and no other: an FCM access
    /// token refused does not cost an APNs provider token (APNs limits how often one is made).
    public func renewCredentials(tenant: TenantID, channel: PushChannel) async {
        await transports[channel]?.renewCredentials(tenant: tenant, channel: channel)
    }

    /// The batch's indexes by channel, each in the batch's order.
    static func split(_ pushes: [OutboundPush]) -> [PushChannel: [Int]] {
        var parts: [PushChannel: [Int]] = [:]
        for index in pushes.indices { parts[pushes[index].device.channel, default: []].append(index) }
        return parts
    }

    static func refusal(_ channel: PushChannel) -> PushResult {
        .refused(channel: channel, status: 0, reason: notConfigured, outcome: .payloadRefused(alert: false))
    }
}
