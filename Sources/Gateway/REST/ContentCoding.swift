import CZlib
import Foundation
import HTTPTypes

/// `Content-Encoding` for the REST API's JSON and property-list answers: gzip or deflate (zlib format, RFC 9110
/// section 8.4.1), chosen from the client's `Accept-Encoding`, for bodies of at least `minimumSize` bytes.
enum ContentCoding: String, Sendable, Equatable {
    case gzip
    case deflate

    /// Smaller bodies are sent as they are: the header bytes and the CPU would outweigh what compression saves.
    static let minimumSize = 512

    /// The coding the client accepts with the highest weight (gzip on a tie), or nil for none (identity).
    /// `*` counts for both; `q=0` refuses.
    static func negotiate(_ acceptEncoding: String?) -> ContentCoding? {
        guard let acceptEncoding else { return nil }
        var weights: [String: Double] = [:]
        for item in acceptEncoding.lowercased().split(separator: ",") {
            let fields = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let name = fields.first, !name.isEmpty else { continue }
            let q = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            weights[name] = min(max(q, 0), 1)
        }
        let gzip = weights["gzip"] ?? weights["x-gzip"] ?? weights["*"] ?? 0
        let deflate = weights["deflate"] ?? weights["*"] ?? 0
        if gzip > 0, gzip >= deflate { return .gzip }
        if deflate > 0 { return .deflate }
        return nil
    }

    /// The body compressed (zlib level 6, the usual balance); nil if zlib fails (the caller then sends it as is).
    func compress(_ data: Data) -> Data? {
        var stream = z_stream()
        // windowBits 15 makes the zlib format (HTTP's `deflate`); 16 more makes gzip.
        let windowBits: Int32 = self == .gzip ? 15 + 16 : 15
        guard
            deflateInit2_(
                &stream,
                6,
                Z_DEFLATED,
                windowBits,
                8,
                Z_DEFAULT_STRATEGY,
                ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)
            ) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, UInt(data.count))) + 32
        var output = Data(count: bound)
        let status = data.withUnsafeBytes { (input: UnsafeRawBufferPointer) -> Int32 in
            output.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Int32 in
                guard let source = input.bindMemory(to: Bytef.self).baseAddress else { return Z_BUF_ERROR }
                stream.next_in = UnsafeMutablePointer(mutating: source)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(out.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.count = Int(stream.total_out)
        return output
    }
}
