import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// Recently encoded representations, each with the value it encodes: reused only for an equal value.
/// Bounded: when full it starts over (entries are cheap to rebuild).
final class RepresentationCache: Sendable {
    private struct Entry: Sendable {
        var value: any Sendable
        var encoded: Representation.Encoded
    }

    private let entries = Mutex([String: Entry]())
    private let capacity: Int

    init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    func lookup<Value: Equatable & Sendable>(_ key: String, _ value: Value) -> Representation.Encoded? {
        entries.withLock { entries in
            guard let entry = entries[key], let cached = entry.value as? Value, cached == value else { return nil }
            return entry.encoded
        }
    }

    func store<Value: Equatable & Sendable>(_ key: String, _ value: Value, _ encoded: Representation.Encoded) {
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(value: value, encoded: encoded)
        }
    }
}

/// Bodies compressed once per identity ETag and coding; bounded (starts over when full).
final class CompressedBodies: Sendable {
    private let entries = Mutex([String: Data]())
    private let capacity = 2048

    func body(_ encoded: Representation.Encoded, _ coding: ContentCoding) -> Data? {
        let key = encoded.etag + coding.rawValue
        if let known = entries.withLock({ $0[key] }) { return known }
        guard let body = coding.compress(encoded.data) else { return nil }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = body
        }
        return body
    }
}

/// Writes a resource as JSON or, when the client's `Accept` asks for it, as an XML property list, with an
/// `ETag` over the exact bytes and `Last-Modified`, and answers conditional requests with 304. Bodies of 512 bytes
/// or more go out gzip- or deflate-compressed when `Accept-Encoding` allows (`ContentCoding`), each coding with
/// its own ETag.
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
        return response(
            Encoded(data: data, contentType: contentType, etag: etag(data)),
            for: request,
            status: status,
            lastModified: lastModified
        )
    }

    /// The same, reusing the bytes encoded for an equal value under the same key (a client polling an unchanged
    /// resource costs a comparison, not an encoding and a hash).
    static func response<Value: Encodable & Equatable & Sendable>(
        _ value: Value,
        for request: Request,
        lastModified: Date? = nil,
        cache: RepresentationCache,
        key: String
    ) throws -> Response {
        let format = format(for: request)
        let cacheKey = format == .json ? key : key + "#plist"
        if let encoded = cache.lookup(cacheKey, value) {
            return response(encoded, for: request, status: .ok, lastModified: lastModified)
        }
        let (data, contentType) = try encode(value, as: format)
        let encoded = Encoded(data: data, contentType: contentType, etag: etag(data))
        cache.store(cacheKey, value, encoded)
        return response(encoded, for: request, status: .ok, lastModified: lastModified)
    }

    /// A representation's bytes and what describes them.
    struct Encoded: Sendable {
        var data: Data
        var contentType: String
        var etag: String
    }

    static func etag(_ data: Data) -> String {
        "\"" + SHA256.hash(data: data).prefix(12).map { String(format: "%02x", $0) }.joined() + "\""
    }

    /// Compressed bodies by their identity ETag and coding: a body is compressed once however often it is sent.
    static let compressed = CompressedBodies()

    private static func response(
        _ encoded: Encoded,
        for request: Request,
        status: HTTPResponse.Status,
        lastModified: Date?
    ) -> Response {
        var (data, contentType, etag) = (encoded.data, encoded.contentType, encoded.etag)
        var coding: ContentCoding?
        if data.count >= ContentCoding.minimumSize,
            let wanted = ContentCoding.negotiate(request.headers[.acceptEncoding]),
            let body = compressed.body(encoded, wanted)
        {
            // Another representation: its own strong validator (RFC 9110 section 8.8.3).
            coding = wanted
            data = body
            etag = String(etag.dropLast()) + (wanted == .gzip ? "-gz\"" : "-df\"")
        }
        var headers: HTTPFields = [
            .eTag: etag, .cacheControl: "private, no-cache", .vary: "Accept, Accept-Encoding, Authorization",
        ]
        if let coding { headers[.contentEncoding] = coding.rawValue }
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
