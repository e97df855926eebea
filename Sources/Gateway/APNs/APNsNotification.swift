import Crypto
import Engine
import Foundation

/// One push as APNs receives it, validated before it is sent.
public struct APNsNotification: Sendable, Equatable {
    public enum Priority: Int, Sendable {
        case immediate = 10
        case throttled = 5
        case low = 1
    }

    public var token: DeviceToken
    public var topic: String
    public var pushType: String
    public var priority: Priority
    /// When APNs may stop trying; nil sends `apns-expiration: 0` (deliver once, do not store).
    public var expiration: Date?
    /// Lower-case UUID, echoed by APNs; deterministic per delivery so that logs of a resend match.
    public var apnsID: String
    /// At most 64 bytes; a resend with the same collapse id replaces, never duplicates, on the device.
    public var collapseID: String?
    public var payload: Data

    public static let maximumPayloadSize = 4096

    public init(
        token: DeviceToken,
        topic: String,
        pushType: String = "alert",
        priority: Priority = .immediate,
        expiration: Date? = nil,
        apnsID: String = UUID().uuidString.lowercased(),
        collapseID: String? = nil,
        payload: Data
    ) throws(EngineError) {
        guard !topic.isEmpty else { throw EngineError(.invalidInput, "the APNs topic is empty") }
        guard payload.count <= (pushType == "voip" ? 5120 : Self.maximumPayloadSize) else {
            throw EngineError(.invalidInput, "the payload has \(payload.count) bytes; APNs accepts at most 4096")
        }
        guard !payload.isEmpty else { throw EngineError(.invalidInput, "the payload is empty") }
        if let collapseID, collapseID.utf8.count > 64 {
            throw EngineError(.invalidInput, "the collapse id is longer than 64 bytes")
        }
        guard UUID(uuidString: apnsID) != nil else { throw EngineError(.invalidInput, "apns-id must be a UUID") }
        self.token = token
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID.lowercased()
        self.collapseID = collapseID
        self.payload = payload
    }

    /// A name-based UUID (SHA-256, version 8 layout) for a delivery, stable across resends and restarts.
    public static func deterministicID(_ parts: String...) -> String {
        var bytes = Array(SHA256.hash(data: Data(parts.joined(separator: "\u{1F}").utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let digits = Array("0123456789abcdef".utf8)
        let hex = String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
        let index = hex.startIndex
        func slice(_ from: Int, _ to: Int) -> Substring {
            hex[hex.index(index, offsetBy: from)..<hex.index(index, offsetBy: to)]
        }
        return "\(slice(0, 8))-\(slice(8, 12))-\(slice(12, 16))-\(slice(16, 20))-\(slice(20, 32))"
    }

    /// The request's header block (`authorization` is added by the client for token auth).
    func headers(authority: String) -> [HTTP2Header] {
        var headers = [
            HTTP2Header(":method", "POST"), HTTP2Header(":scheme", "https"),
            HTTP2Header(":path", "/3/device/\(token.rawValue)"), HTTP2Header(":authority", authority),
            HTTP2Header("apns-topic", topic), HTTP2Header("apns-push-type", pushType),
            HTTP2Header("apns-priority", String(priority.rawValue)),
            HTTP2Header("apns-expiration", String(Int64(expiration?.timeIntervalSince1970 ?? 0))),
            HTTP2Header("apns-id", apnsID),
        ]
        if let collapseID { headers.append(HTTP2Header("apns-collapse-id", collapseID)) }
        return headers
    }
}

/// The alert payload of an impulse: its short title, the true unread count as badge, no sound by default.
public struct ImpulsePayload: Sendable {
    public var title: String
    public var body: String?
    public var badge: Int
    public var impulseID: String
    public var sound: String?

    public init(title: String, body: String? = nil, badge: Int, impulseID: String, sound: String? = nil) {
        self.title = title
        self.body = body
        self.badge = badge
        self.impulseID = impulseID
        self.sound = sound
    }

    /// The payload as JSON with sorted keys, written directly: this runs once per push, and going through
    /// `JSONSerialization` (bridging to dictionaries of `Any`) cost more than the rest of the push.
    public func encoded() throws -> Data {
        var json = #"{"aps":{"alert":{"#
        if let body { json += #""body":"# + Self.quoted(body) + "," }
        json += #""title":"# + Self.quoted(title) + #"},"badge":"# + String(max(0, badge))
        if let sound { json += #","sound":"# + Self.quoted(sound) }
        json += #"},"impulseID":"# + Self.quoted(impulseID) + "}"
        return Data(json.utf8)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped (RFC 8259, section 7).
    static func quoted(_ text: String) -> String {
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
