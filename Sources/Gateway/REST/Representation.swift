import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Writes a resource as JSON or, when the client's `Accept` asks for it, as an XML property list, with an
/// `ETag` over the exact bytes and `Last-Modified`, and answers conditional requests with 304.
struct Representation {
    static let plistType = "application/x-plist"
    /// Encoders read this to leave out `null` members: property lists have no null.
    // A non-empty raw value always makes a key, so the unwrap cannot fail.
    static let omitNullsKey = CodingUserInfoKey(rawValue: "impulse.omitNulls")!

    enum Format { case json, plist }

    static func format(for request: Request) -> Format {
        guard let accept = request.headers[.accept]?.lowercased() else { return .json }
        let wanted = accept.split(separator: ",").compactMap { item -> (String, Double)? in
            let fields = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let type = fields.first else { return nil }
            let q = fields.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return (type, q)
        }
        let plist = wanted.first { $0.0 == plistType || $0.0 == "application/plist" }?.1 ?? 0
        let json = wanted.first { $0.0 == "application/json" }?.1 ?? 0
        return plist > 0 && plist >= json ? .plist : .json
    }

    static func encode(_ value: some Encodable, as format: Format) throws -> (Data, String) {
        switch format {
        case .json:
            let encoder = JSONEncoder()
            // Sorted keys make the bytes, and so the ETag, depend only on the content.
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try encoder.encode(value), "application/json; charset=utf-8")
        case .plist:
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .xml
            encoder.userInfo[omitNullsKey] = true
            return (try encoder.encode(value), plistType)
        }
    }

    /// A 200 (or 201) with the body, or a 304 when the client's validators still match.
    static func response(
        _ value: some Encodable,
        for request: Request,
        status: HTTPResponse.Status = .ok,
        lastModified: Date? = nil
    ) throws -> Response {
        let format = format(for: request)
        let (data, contentType) = try encode(value, as: format)
        let etag = "\"" + SHA256.hash(data: data).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
        var headers: HTTPFields = [
            .eTag: etag, .cacheControl: "private, no-cache", .vary: "Accept, Authorization",
        ]
        if let lastModified { headers[.lastModified] = HTTPDate.format(lastModified) }
        if status == .ok, request.method == .get || request.method == .head,
            notModified(request, etag: etag, lastModified: lastModified)
        {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = contentType
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// RFC 9110 13.2.2: `If-None-Match` wins over `If-Modified-Since`; weak comparison for `If-None-Match`.
    static func notModified(_ request: Request, etag: String, lastModified: Date?) -> Bool {
        let candidates = request.headers[values: .ifNoneMatch]
        if !candidates.isEmpty {
            let tags = candidates.flatMap { $0.split(separator: ",") }.map {
                $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
            }
            return tags.contains("*") || tags.contains(etag)
        }
        if let since = request.headers[.ifModifiedSince].flatMap(HTTPDate.parse), let lastModified {
            return lastModified.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
        }
        return false
    }
}

extension KeyedEncodingContainer {
    /// Encodes `null` for JSON (the original API sends `"videoURL": null`) and nothing for property lists.
    mutating func encodeNullable<T: Encodable>(_ value: T?, forKey key: Key, omitNulls: Bool) throws {
        if let value {
            try encode(value, forKey: key)
        } else if !omitNulls {
            try encodeNil(forKey: key)
        }
    }
}
