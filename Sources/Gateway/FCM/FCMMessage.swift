import Engine
import Foundation
import NIOCore

/// One `messages:send` request of FCM's HTTP v1 API: a notification for one Android device.
///
/// The message: the impulse's title (and body, when it has one) as the notification; `android.collapse_key` the
/// delivery's collapse id, so a resend replaces the first; `android.ttl` how long FCM keeps it for an offline
/// phone (the tenant's push expiry; 0: now or never); high priority, as a visible notification; and data with
/// the delivery and impulse ids and the true unread count (FCM's data values are strings).
///
/// The device is addressed by its registration token (`token`) or, when the app registered its Firebase
/// Installation ID (`fid`, which Firebase's SDKs now prefer), by that: an installation id is 22 URL-safe base64
/// characters whose first is `c` to `f` (its first four bits are 0111), a form no registration token has.
public struct FCMMessage: PushRequest, Equatable {
    public var project: String
    public var token: String
    public var title: String
    public var body: String?
    public var collapseKey: String
    public var ttl: Duration
    public var data: [String: String]
    public let payload: Data

    public init(
        project: String,
        token: String,
        title: String,
        body: String? = nil,
        collapseKey: String,
        ttl: Duration,
        data: [String: String]
    ) {
        self.project = project
        self.token = token
        self.title = title
        self.body = body
        self.collapseKey = collapseKey
        self.ttl = ttl
        self.data = data
        // Written directly, keys in order: JSONSerialization took twice the broker's CPU of an APNs push (a
        // million-user burst with half on Android, BENCHMARKS.md round 21).
        var json = JSONBytes(capacity: 200 + token.utf8.count + title.utf8.count + collapseKey.utf8.count)
        json.raw(#"{"message":{"android":{"collapse_key":"#)
        json.string(collapseKey)
        json.raw(#","priority":"HIGH","ttl":""#)
        json.decimal(max(0, Int64(ttl.components.seconds)))
        json.raw(#"s"},"data":{"#)
        for (index, key) in data.keys.sorted().enumerated() {
            if index > 0 { json.raw(",") }
            json.string(key)
            json.raw(":")
            json.string(data[key] ?? "")
        }
        json.raw(#"},"notification":{"#)
        if let body, !body.isEmpty {
            json.raw(#""body":"#)
            json.string(body)
            json.raw(",")
        }
        json.raw(#""title":"#)
        json.string(title)
        json.raw(Self.isInstallationID(token) ? #"},"fid":"# : #"},"token":"#)
        json.string(token)
        json.raw("}}")
        payload = Data(json.bytes)
    }

    /// Whether a device identity is a Firebase Installation ID rather than a registration token.
    public static func isInstallationID(_ identity: String) -> Bool {
        let bytes = identity.utf8
        guard bytes.count == 22, let first = bytes.first, (UInt8(ascii: "c")...UInt8(ascii: "f")).contains(first)
        else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    /// The message for one push: its expiry (nil: now or never) as a TTL from `now`.
    public init(_ push: OutboundPush, project: String, now: Date = Date()) {
        self.init(
            project: project,
            token: push.device.token.rawValue,
            title: push.title,
            collapseKey: push.collapseID,
            ttl: .seconds(max(0, (push.expiresAt ?? now).timeIntervalSince(now).rounded(.down))),
            data: [
                "delivery_id": "\(push.delivery.rawValue)", "impulse_id": push.impulse.rawValue,
                "unread_count": "\(push.badge)",
            ]
        )
    }

    public func headerBlock(authority: String, authorization: String?) -> HTTP2HeaderBlock {
        var block = HTTP2HeaderBlock(
            byteCapacity: 160 + project.utf8.count + authority.utf8.count + (authorization?.utf8.count ?? 0),
            fieldCapacity: 7
        )
        block.append(":method", "POST")
        block.append(":scheme", "https")
        block.append(":path") { bytes in
            bytes += "/v1/projects/".utf8
            bytes += project.utf8
            bytes += "/messages:send".utf8
        }
        block.append(":authority", authority)
        block.append("content-type", "application/json; charset=UTF-8")
        block.append("content-length") { $0.appendDecimal(Int64(payload.count)) }
        if let authorization { block.append("authorization", authorization) }
        return block
    }
}

extension PushDialect {
    /// FCM HTTP v1: an accepted message's id is its `name`; refusals are mapped by `PushOutcome.fcm`; 429 and
    /// 503 pause the pool for their `Retry-After` (the project's quota is shared by all its senders).
    public static let fcm = PushDialect(
        name: "FCM",
        result: { FCMAnswer($0).result },
        acceptedID: { FCMAnswer($0).messageName ?? "" },
        waitsOutUnavailable: false,
        pauseAsked: { response in
            guard let status = response.status, status == 429 || status == 503 else { return nil }
            return FCMAnswer.retryAfter(response["retry-after"]) ?? .seconds(1)
        },
        authorizationFailure: { error in
            if let refused = (error as? FCMTokenError)?.refusedGrant {
                return .refused(
                    channel: .fcm,
                    status: 401,
                    reason: refused,
                    outcome: .credentialRefused(reason: refused)
                )
            }
            return .transportFailure(description: "cannot get an FCM access token: \(error)", resendable: true)
        }
    )
}

/// JSON text written byte by byte: the parts given as they are, strings quoted and escaped (RFC 8259).
struct JSONBytes {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func decimal(_ value: Int64) { bytes += String(value).utf8 }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += Array(#"\u00"#.utf8)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

/// FCM's answer to one `messages:send`, read: its status, the error code and whether it is about the token.
struct FCMAnswer {
    var status: Int?
    var messageName: String?
    var errorCode: String?
    var aboutToken = false
    var retryAfter: Duration?

    init(_ response: HTTP2Message, now: Date = Date()) {
        status = response.status
        // An accepted message's answer is `{"name": "projects/.../messages/..."}`: read directly, as every push has
        // one (JSONSerialization cost as much as the rest of the push); anything else is parsed.
        if status == 200, let name = Self.messageName(response.body.readableBytesView) {
            messageName = name
            return
        }
        retryAfter = Self.retryAfter(response["retry-after"], now: now)
        let object = try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
        messageName = object?["name"] as? String
        guard let error = object?["error"] as? [String: Any] else { return }
        errorCode = error["status"] as? String
        for detail in error["details"] as? [[String: Any]] ?? [] {
            if let code = detail["errorCode"] as? String { errorCode = code }
            for violation in detail["fieldViolations"] as? [[String: Any]] ?? [] {
                if let field = violation["field"] as? String, field == "message.token" || field == "message.fid" {
                    aboutToken = true
                }
            }
        }
    }

    var result: PushResult {
        guard let status else { return .transportFailure(description: "an answer without :status", resendable: false) }
        if status == 200 { return .accepted(apnsID: messageName ?? "") }
        let outcome = PushOutcome.fcm(
            status: status,
            errorCode: errorCode,
            aboutToken: aboutToken,
            retryAfter: retryAfter,
            answeredAt: Date()
        )
        return .refused(channel: .fcm, status: status, reason: errorCode ?? "HTTP \(status)", outcome: outcome)
    }

    /// The `name` string of an answer's body, when it has one without escapes (FCM's message names have none).
    static func messageName(_ body: ByteBufferView) -> String? {
        let key = Array(#""name""#.utf8)
        guard let start = body.firstRange(of: key)?.upperBound else { return nil }
        var index = start
        func skipSpace() {
            while index < body.endIndex, [0x20, 0x09, 0x0A, 0x0D].contains(body[index]) { index += 1 }
        }
        skipSpace()
        guard index < body.endIndex, body[index] == UInt8(ascii: ":") else { return nil }
        index += 1
        skipSpace()
        guard index < body.endIndex, body[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        let valueStart = index
        while index < body.endIndex, body[index] != UInt8(ascii: "\"") {
            guard body[index] != UInt8(ascii: "\\") else { return nil }
            index += 1
        }
        guard index < body.endIndex else { return nil }
        return String(decoding: body[valueStart..<index], as: UTF8.self)
    }

    /// `Retry-After` in seconds or as an HTTP date; nil when absent or unreadable. At most an hour.
    static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(min(seconds, 3600)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .seconds(min(max(0, date.timeIntervalSince(now)), 3600))
    }
}
