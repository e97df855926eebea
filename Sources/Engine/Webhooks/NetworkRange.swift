/// A range of addresses in CIDR notation (`10.0.0.0/8`, `fd00::/8`, or one address): the proxies whose
/// `X-Forwarded-For` the broker believes.
public struct NetworkRange: Sendable, Hashable, CustomStringConvertible {
    public let base: NetworkAddress
    public let bits: Int

    /// `address/bits`, or a single address (all its bits); nil when it is neither.
    public init?(cidr text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let base = NetworkAddress(literal: first) else { return nil }
        let width = base.bytes.count * 8
        if parts.count == 2 {
            guard let bits = Int(parts[1]), (0...width).contains(bits) else { return nil }
            self.bits = bits
        } else {
            self.bits = width
        }
        self.base = base
    }

    public func contains(_ address: NetworkAddress) -> Bool {
        guard address.bytes.count == base.bytes.count else { return false }
        for bit in 0..<bits {
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if address.bytes[bit / 8] & mask != base.bytes[bit / 8] & mask { return false }
        }
        return true
    }

    public var description: String { "\(base)/\(bits)" }
}
