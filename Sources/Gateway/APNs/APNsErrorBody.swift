import NIOCore

extension HTTP2PushClient {
    /// APNs' error body: `{"reason": "...", "timestamp": <milliseconds>}` (the timestamp only with 410).
    struct ErrorBody: Decodable, Equatable {
        var reason: String?
        var timestamp: Double?
    }
}

extension HTTP2PushClient.ErrorBody {
    /// The body as APNs writes it: one object of a `reason` string without escapes and an optional integer
    /// `timestamp`, in either order, with any whitespace. `nil` for anything else, which `JSONDecoder` then reads.
    init?(apnsShape bytes: ByteBufferView) {
        let body = bytes.withContiguousStorageIfAvailable { buffer -> Self? in
            var scanner = ErrorBodyScanner(bytes: buffer)
            return scanner.body()
        }
        guard let body = body ?? nil else { return nil }
        self = body
    }
}

/// Reads `ErrorBody`'s shape from bytes; gives up (nil) at the first thing outside it.
private struct ErrorBodyScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func body() -> HTTP2PushClient.ErrorBody? {
        var body = HTTP2PushClient.ErrorBody()
        guard take(UInt8(ascii: "{")) else { return nil }
        if take(UInt8(ascii: "}")) { return end() ? body : nil }
        repeat {
            guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "reason" where body.reason == nil:
                guard let reason = string() else { return nil }
                body.reason = reason
            case "timestamp" where body.timestamp == nil:
                guard let timestamp = integer() else { return nil }
                body.timestamp = timestamp
            default:
                return nil
            }
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}")) && end() ? body : nil
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func end() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    /// A string without escapes or control characters.
    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                defer { index += 1 }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            index += 1
        }
        return nil
    }

    /// A non-negative integer of at most 15 digits (exact as a `Double`).
    private mutating func integer() -> Double? {
        skipSpace()
        var value: Int64 = 0
        var digits = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
            digits += 1
            index += 1
            if digits > 15 { return nil }
        }
        guard digits > 0 else { return nil }
        // JSON has no leading zeros; a fraction or an exponent goes to the decoder.
        if digits > 1, bytes[index - digits] == UInt8(ascii: "0") { return nil }
        if index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        return Double(value)
    }
}
