import Crypto
import Engine
import Foundation

/// One push as APNs receives it, validated before it is sent.
public struct APNsNotification: PushRequest, Equatable {
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
        guard Self.isUUID(apnsID) else { throw EngineError(.invalidInput, "apns-id must be a UUID") }
        try self.init(
            token: token,
            topic: topic,
            pushType: pushType,
            priority: priority,
            expiration: expiration,
            generatedID: apnsID.utf8.contains { (0x41...0x46).contains($0) } ? apnsID.lowercased() : apnsID,
            collapseID: collapseID,
            payload: payload
        )
    }

    /// For an apns-id this module made (`deterministicID`): a lower-case UUID by construction, so it is not
    /// checked again (checking it was 1.3% of the gateway's time). Everything else is checked.
    init(
        token: DeviceToken,
        topic: String,
        pushType: String = "alert",
        priority: Priority = .immediate,
        expiration: Date? = nil,
        generatedID apnsID: String,
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
        self.token = token
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.apnsID = apnsID
        self.collapseID = collapseID
        self.payload = payload
    }

    /// A name-based UUID (SHA-256, version 8 layout) for a delivery, stable across resends and restarts.
    public static func deterministicID(_ parts: String...) -> String {
        // Hashed part by part and printed from the digest's bytes: building an input array and copying the
        // digest into another was 3% of the gateway's time, the hash itself a tenth of that.
        var hasher = SHA256()
        for (index, part) in parts.enumerated() {
            if index > 0 { withUnsafeBytes(of: UInt8(0x1F)) { hasher.update(bufferPointer: $0) } }
            var part = part
            part.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }
        return hasher.finalize().withUnsafeBytes { digest in
            String(unsafeUninitializedCapacity: 36) { text in
                let digits: StaticString = "0123456789abcdef"
                var at = 0
                for index in 0..<16 {
                    var byte = digest[index]
                    if index == 6 { byte = (byte & 0x0F) | 0x80 }
                    if index == 8 { byte = (byte & 0x3F) | 0x80 }
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    text[at] = digits.utf8Start[Int(byte >> 4)]
                    text[at + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    at += 2
                }
                return at
            }
        }
    }

    /// Whether the text is a UUID in its 8-4-4-4-12 hexadecimal form (either case).
    static func isUUID(_ text: String) -> Bool {
        // On the contiguous bytes: checked once per push, and iterating the UTF-8 view was 0.9% of a burst.
        var text = text
        return text.withUTF8 { bytes in
            guard bytes.count == 36 else { return false }
            for index in 0..<36 {
                let byte = bytes[index]
                switch index {
                case 8, 13, 18, 23: guard byte == UInt8(ascii: "-") else { return false }
                default:
                    guard (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
                    else { return false }
                }
            }
            return true
        }
    }

    /// The request's header block; `authorization` is the field's whole value (`bearer <provider token>`).
    public func headerBlock(authority: String, authorization: String?) -> HTTP2HeaderBlock {
        // The names and the values of bounded length take at most 195 bytes; the others are counted. (A fixed
        // 250 plus some of them was too small, and each push's block was copied once as it grew.)
        var block = HTTP2HeaderBlock(
            byteCapacity: 200 + token.rawValue.utf8.count + authority.utf8.count + topic.utf8.count
                + pushType.utf8.count + (collapseID?.utf8.count ?? 0) + (authorization?.utf8.count ?? 0),
            fieldCapacity: 11
        )
        block.append(":method", "POST")
        block.append(":scheme", "https")
        block.append(":path") { bytes in
            bytes += "/3/device/".utf8
            bytes += token.rawValue.utf8
        }
        block.append(":authority", authority)
        block.append("apns-topic", topic)
        block.append("apns-push-type", pushType)
        block.append("apns-priority") { $0.appendDecimal(Int64(priority.rawValue)) }
        block.append("apns-expiration") { $0.appendDecimal(Int64(expiration?.timeIntervalSince1970 ?? 0)) }
        // New in every push: kept out of HPACK's table, where each push's 133 bytes evicted the provider token
        // about every 30 pushes (nghttp2 never indexes `:path` itself).
        block.append("apns-id", apnsID, indexed: false)
        if let collapseID { block.append("apns-collapse-id", collapseID, indexed: false) }
        if let authorization { block.append("authorization", authorization) }
        return block
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

    /// The payload as JSON with sorted keys, written byte by byte: this runs once per push, and going through
    /// `JSONSerialization` (bridging to dictionaries of `Any`) cost more than the rest of the push; concatenating
    /// strings still cost 4% of the gateway's time in a profile.
    public func encoded() throws -> Data {
        var json: [UInt8] = []
        json.reserveCapacity(
            64 + title.utf8.count + impulseID.utf8.count + (body?.utf8.count ?? 0) + (sound?.utf8.count ?? 0)
        )
        json += #"{"aps":{"alert":{"#.utf8
        if let body {
            json += #""body":"#.utf8
            Self.appendQuoted(body, to: &json)
            json.append(UInt8(ascii: ","))
        }
        json += #""title":"#.utf8
        Self.appendQuoted(title, to: &json)
        json += #"},"badge":"#.utf8
        json += String(max(0, badge)).utf8
        if let sound {
            json += #","sound":"#.utf8
            Self.appendQuoted(sound, to: &json)
        }
        json += #"},"impulseID":"#.utf8
        Self.appendQuoted(impulseID, to: &json)
        json.append(UInt8(ascii: "}"))
        return Data(json)
    }

    /// Appends a JSON string literal: quotes, backslashes and control characters escaped (RFC 8259, section 7).
    /// Bytes from 0x20 up go through as they are: a Swift string is valid UTF-8.
    static func appendQuoted(_ text: String, to json: inout [UInt8]) {
        json.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): json += #"\""#.utf8
            case UInt8(ascii: "\\"): json += #"\\"#.utf8
            case UInt8(ascii: "\n"): json += #"\n"#.utf8
            case UInt8(ascii: "\r"): json += #"\r"#.utf8
            case UInt8(ascii: "\t"): json += #"\t"#.utf8
            case ..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                json += #"\u00"#.utf8
                json.append(hex[Int(byte >> 4)])
                json.append(hex[Int(byte & 0x0F)])
            default: json.append(byte)
            }
        }
        json.append(UInt8(ascii: "\""))
    }
}
