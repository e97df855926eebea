/// A header block as nghttp2 takes it: every name and value in one byte array, with their offsets.
///
/// The APNs client writes one per push. Built from `HTTP2Header`s, each field was two strings to create, copy,
/// retain and release, and the block was copied once more for nghttp2; sending a batch's requests took 8.5% of
/// the gateway's CPU in a profile, 4.5% with blocks (BENCHMARKS.md, round 12). Field names must be lower-case.
public struct HTTP2HeaderBlock: Sendable {
    struct Field: Sendable {
        var name: Int
        var nameLength: Int
        var value: Int
        var valueLength: Int
        var indexed: Bool
    }

    /// Starts with one unused byte, so that the storage always has a base address.
    private(set) var bytes: [UInt8]
    private(set) var fields: [Field]

    public init(byteCapacity: Int = 256, fieldCapacity: Int = 12) {
        bytes = [0]
        bytes.reserveCapacity(byteCapacity + 1)
        fields = []
        fields.reserveCapacity(fieldCapacity)
    }

    public init(_ headers: [HTTP2Header]) {
        self.init(
            byteCapacity: headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count },
            fieldCapacity: headers.count
        )
        for header in headers { append(header) }
    }

    /// Appends a field (its name lower-case, as `HTTP2Header` keeps it).
    public mutating func append(_ header: HTTP2Header) {
        append(name: header.name.utf8, indexed: header.indexed) { $0.append(contentsOf: header.value.utf8) }
    }

    /// Appends a field whose value is `value`.
    public mutating func append(_ name: StaticString, _ value: String, indexed: Bool = true) {
        append(name, indexed: indexed) { $0.append(contentsOf: value.utf8) }
    }

    /// Appends a field whose value `write` appends to the block's bytes (to build a value from parts without
    /// creating a string).
    public mutating func append(_ name: StaticString, indexed: Bool = true, value write: (inout [UInt8]) -> Void) {
        append(name: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), indexed: indexed, write)
    }

    private mutating func append(
        name: some Collection<UInt8>,
        indexed: Bool,
        _ write: (inout [UInt8]) -> Void
    ) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        write(&bytes)
        fields.append(
            Field(
                name: nameStart,
                nameLength: valueStart - nameStart,
                value: valueStart,
                valueLength: bytes.count - valueStart,
                indexed: indexed
            )
        )
    }

    /// The fields as `HTTP2Header`s (for logs and tests).
    public var headers: [HTTP2Header] {
        fields.map { field in
            var header = HTTP2Header(
                lowercased: String(decoding: bytes[field.name..<field.name + field.nameLength], as: UTF8.self),
                String(decoding: bytes[field.value..<field.value + field.valueLength], as: UTF8.self)
            )
            header.indexed = field.indexed
            return header
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends a decimal integer's digits without creating a string.
    mutating func appendDecimal(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        let start = endIndex
        repeat {
            append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        self[start...].reverse()
    }
}
