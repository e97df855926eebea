import Foundation

/// An IPv4 or IPv6 address, read the way the system's resolver reads a host (so that `2130706433`, `0x7f000001`,
/// `0177.0.0.1`, `127.1` and `0` are all seen for the addresses they connect to), and whether it is on the public
/// internet: webhook endpoints may point nowhere else unless the operator allows private addresses.
public struct NetworkAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6), in network order.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// An address literal: IPv4 in any form `inet_aton` takes (one to four parts, each decimal, octal with a
    /// leading `0` or hexadecimal with `0x`), or IPv6, with or without brackets. Nil for a host name.
    public init?(literal text: String) {
        var text = text
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let v4 = Self.ipv4(text) {
            bytes = v4
        } else if text.contains(":"), let v6 = Self.ipv6(text) {
            bytes = v6
        } else {
            return nil
        }
    }

    public var isIPv4: Bool { bytes.count == 4 }

    public var description: String {
        if isIPv4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }

    /// On the public internet: none of IANA's special-purpose ranges (RFC 6890 and its updates) that lead to
    /// this machine, a private or shared network, a link, documentation, benchmarking, multicast or nowhere.
    /// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are judged by it or refused.
    public var isPublic: Bool {
        if isIPv4 { return Self.isPublicIPv4(bytes) }
        let b = bytes
        func prefix(_ value: [UInt8], bits: Int) -> Bool {
            for bit in 0..<bits where (b[bit / 8] >> (7 - bit % 8)) & 1 != (value[bit / 8] >> (7 - bit % 8)) & 1 {
                return false
            }
            return true
        }
        let zero = [UInt8](repeating: 0, count: 16)
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated; also :: and ::1): the IPv4 address decides,
        // and the compatible form is refused whatever it holds.
        if prefix(zero, bits: 80), b[10] == 0xff, b[11] == 0xff { return Self.isPublicIPv4(Array(b[12..<16])) }
        if prefix(zero, bits: 96) { return false }
        // 64:ff9b::/96 (NAT64, well-known) carries an IPv4 address; 64:ff9b:1::/48 (local NAT64) is private.
        if prefix([0, 0x64, 0xff, 0x9b] + zero, bits: 96) { return Self.isPublicIPv4(Array(b[12..<16])) }
        if prefix([0, 0x64, 0xff, 0x9b, 0, 1] + zero, bits: 48) { return false }
        // 2002::/16 (6to4) carries an IPv4 address in its next 32 bits.
        if b[0] == 0x20, b[1] == 0x02 { return Self.isPublicIPv4(Array(b[2..<6])) }
        let refused: [(value: [UInt8], bits: Int)] = [
            ([0x01, 0x00] + zero, 64),  // 100::/64 discard
            ([0x20, 0x01, 0x00, 0x00] + zero, 32),  // 2001::/32 Teredo
            ([0x20, 0x01, 0x00] + zero, 23),  // 2001::/23 IETF protocol assignments
            ([0x20, 0x01, 0x0d, 0xb8] + zero, 32),  // 2001:db8::/32 documentation
            ([0x3f, 0xff] + zero, 20),  // 3fff::/20 documentation
            ([0xfc] + zero, 7),  // fc00::/7 unique local
            ([0xfe, 0x80] + zero, 10),  // fe80::/10 link-local
            ([0xfe, 0xc0] + zero, 10),  // fec0::/10 site-local (deprecated)
            ([0xff] + zero, 8),  // ff00::/8 multicast
        ]
        return !refused.contains { prefix($0.value, bits: $0.bits) }
    }

    static func isPublicIPv4(_ b: [UInt8]) -> Bool {
        let (a, second, third) = (b[0], b[1], b[2])
        switch a {
        case 0, 10, 127: return false  // "this network", private, loopback
        case 100 where (64...127).contains(second): return false  // shared address space (carrier NAT)
        case 169 where second == 254: return false  // link-local (cloud metadata services)
        case 172 where (16...31).contains(second): return false
        case 192 where second == 168: return false
        case 192 where second == 0 && (third == 0 || third == 2): return false  // IETF assignments, TEST-NET-1
        case 192 where second == 88 && third == 99: return false  // 6to4 relay anycast
        case 198 where second == 18 || second == 19: return false  // benchmarking
        case 198 where second == 51 && third == 100: return false  // TEST-NET-2
        case 203 where second == 0 && third == 113: return false  // TEST-NET-3
        case 224...255: return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    /// `inet_aton`'s forms: `a`, `a.b`, `a.b.c`, `a.b.c.d`; the last part fills the bytes that remain.
    static func ipv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        let lastBytes = 5 - values.count
        for value in values.dropLast() where value > 255 { return nil }
        guard let last = values.last, last < (UInt64(1) << (8 * lastBytes)) else { return nil }
        var bytes = values.dropLast().map { UInt8($0) }
        for shift in stride(from: 8 * (lastBytes - 1), through: 0, by: -8) {
            bytes.append(UInt8((last >> shift) & 0xff))
        }
        return bytes
    }

    private static func number(_ part: Substring) -> UInt64? {
        guard !part.isEmpty, part.count <= 32 else { return nil }
        let lower = part.lowercased()
        if lower.hasPrefix("0x") {
            let digits = lower.dropFirst(2)
            return digits.isEmpty ? 0 : UInt64(digits, radix: 16)
        }
        if lower.count > 1, lower.hasPrefix("0") { return UInt64(lower.dropFirst(), radix: 8) }
        return UInt64(lower, radix: 10)
    }

    /// RFC 4291 text forms, `::` and a trailing dotted IPv4 part included; a zone (`%eth0`) is refused.
    static func ipv6(_ text: String) -> [UInt8]? {
        guard !text.contains("%"), text.count <= 64 else { return nil }
        var groups: [UInt16] = []
        var tail: [UInt16] = []
        var text = Substring(text)
        var tailBytes: [UInt8] = []
        if let lastColon = text.lastIndex(of: ":"), text[text.index(after: lastColon)...].contains(".") {
            guard let v4 = ipv4(String(text[text.index(after: lastColon)...])),
                text[text.index(after: lastColon)...].split(separator: ".").count == 4
            else { return nil }
            tailBytes = v4
            text = text[...lastColon]
            if text.hasSuffix("::") == false { text = text.dropLast() }
        }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func parse(_ half: String) -> [UInt16]? {
            if half.isEmpty { return [] }
            var result: [UInt16] = []
            for piece in half.split(separator: ":", omittingEmptySubsequences: false) {
                guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                result.append(value)
            }
            return result
        }
        guard let head = parse(halves[0]) else { return nil }
        groups = head
        if halves.count == 2 {
            guard let rest = parse(halves[1]) else { return nil }
            tail = rest
        }
        let available = 8 - tailBytes.count / 2
        let count = groups.count + tail.count
        if halves.count == 2 {
            guard count < available else { return nil }
            groups += [UInt16](repeating: 0, count: available - count) + tail
        } else {
            guard count == available else { return nil }
        }
        return groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xff)] } + tailBytes
    }
}
