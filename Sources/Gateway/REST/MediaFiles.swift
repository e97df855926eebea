import Foundation
import HTTPTypes
import Hummingbird
import NIOPosix

/// The public media folder under `/media/`: images, audio and video the catalog links to.
///
/// A request names a file by its path below the folder. The path is percent-decoded once, refused if it holds a
/// NUL or another control character, and resolved to its real path (symbolic links followed); only a regular file
/// whose real path lies inside the folder's real path is served. Directories are not listed or redirected.
/// Answers carry `X-Content-Type-Options: nosniff` and a sandboxing `Content-Security-Policy`, so a file cannot
/// run script on the origin that also serves `/SendPush`.
public struct MediaFiles: Sendable {
    /// The folder as configured; its real path is taken on each request (it may be created after start).
    let folder: String
    let fileIO = FileIO()

    enum Resolution: Equatable {
        case file(String)
        case notFound
        case invalid(String)
    }

    /// Where a request path below `/media/` (still percent-encoded) leads, given the folder's real path.
    static func resolve(_ encoded: String, root: String) -> Resolution {
        guard let decoded = encoded.removingPercentEncoding else { return .invalid("the path is not valid UTF-8") }
        guard !decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            return .invalid("the path holds a control character")
        }
        let segments = decoded.split(separator: "/", omittingEmptySubsequences: false)
        guard !segments.isEmpty, segments.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") }) else {
            return .notFound
        }
        guard let real = realPath(root + "/" + segments.joined(separator: "/")), real.hasPrefix(root + "/") else {
            return .notFound
        }
        var info = stat()
        guard stat(real, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return .notFound }
        return .file(real)
    }

    /// Whether `/media/<encoded>` would serve a file from `folder` (what `catalog import` checks its links with).
    public static func serves(_ encoded: String, folder: String) -> Bool {
        guard let root = realPath(folder), case .file = resolve(encoded, root: root) else { return false }
        return true
    }

    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Answers a GET or HEAD for `/media/<encoded>`.
    func respond(_ request: Request, context: some RequestContext) async throws -> Response {
        let prefix = "/media/"
        let path = request.uri.path
        guard path.hasPrefix(prefix) else { throw Problem.notFound("no such media file") }
        let encoded = String(path.dropFirst(prefix.count))
        let folder = folder
        // realpath and stat block: on the thread pool, not on an event loop or the cooperative pool.
        let (resolution, size, modified) = try await NIOThreadPool.singleton.runIfActive {
            () -> (Resolution, Int, Date) in
            guard let root = Self.realPath(folder) else { return (.notFound, 0, Date()) }
            let resolution = Self.resolve(encoded, root: root)
            guard case .file(let file) = resolution else { return (resolution, 0, Date()) }
            var info = stat()
            guard stat(file, &info) == 0 else { return (.notFound, 0, Date()) }
            return (resolution, Int(info.st_size), Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec)))
        }
        let file: String
        switch resolution {
        case .invalid(let detail): throw Problem.badRequest(detail, code: "invalid-path")
        case .notFound: throw Problem.notFound("no such media file")
        case .file(let found): file = found
        }
        var headers: HTTPFields = [
            .contentType: Self.contentType(of: file),
            .acceptRanges: "bytes",
            .lastModified: HTTPDate.format(modified),
            .eTag: "\"\(String(size, radix: 16))-\(String(Int(modified.timeIntervalSince1970), radix: 16))\"",
            .cacheControl: "public, max-age=3600",
        ]
        headers.append(contentsOf: Self.protectiveHeaders)
        if let match = request.headers[.ifNoneMatch],
            match.split(separator: ",").contains(where: {
                $0.trimmingCharacters(in: .whitespaces) == headers[.eTag]
                    || $0.trimmingCharacters(in: .whitespaces) == "*"
            })
        {
            return Response(status: .notModified, headers: headers)
        }
        var range: ClosedRange<Int>?
        if let field = request.headers[.range], Self.ifRangeHolds(request.headers[.ifRange], headers) {
            switch ByteRange.parse(field, size: size) {
            case .none: break
            case .unsatisfiable:
                // RFC 9110 section 15.5.17: the representation's length, and what went wrong as a problem.
                var problemHeaders: HTTPFields = [.contentRange: "bytes */\(size)", .acceptRanges: "bytes"]
                problemHeaders.append(contentsOf: Self.protectiveHeaders)
                throw Problem(
                    .rangeNotSatisfiable,
                    "range-not-satisfiable",
                    "the range \(field) starts at or past the end of the file's \(size) bytes",
                    headers: problemHeaders
                )
            case .range(let bytes):
                range = bytes
            }
        }
        if let range {
            headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            headers[.contentLength] = String(range.count)
            let body = try await fileIO.loadFile(path: file, range: range, context: context)
            return Response(status: .partialContent, headers: headers, body: body)
        }
        headers[.contentLength] = String(size)
        if size == 0 { return Response(status: .ok, headers: headers) }
        let body = try await fileIO.loadFile(path: file, context: context)
        return Response(status: .ok, headers: headers, body: body)
    }

    /// `If-Range` (RFC 9110 section 13.1.5): the range applies only while the validator still matches.
    static func ifRangeHolds(_ ifRange: String?, _ headers: HTTPFields) -> Bool {
        guard let ifRange else { return true }
        return ifRange == headers[.eTag] || ifRange == headers[.lastModified]
    }

    /// Headers every media answer carries: no sniffing a type, no script, no framing.
    static let protectiveHeaders: HTTPFields = [
        .xContentTypeOptions: "nosniff",
        .contentSecurityPolicy: "default-src 'none'; sandbox",
    ]

    static func contentType(of file: String) -> String {
        let types = [
            "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
            "heic": "image/heic", "svg": "image/svg+xml", "mp4": "video/mp4", "m4v": "video/x-m4v",
            "mov": "video/quicktime", "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav",
            "caf": "audio/x-caf", "pdf": "application/pdf", "json": "application/json",
            "txt": "text/plain; charset=utf-8",
        ]
        let suffix = file.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return types[suffix] ?? "application/octet-stream"
    }
}

/// One byte range of a `Range` field (RFC 9110 section 14.1.2), against a representation of `size` bytes.
enum ByteRange: Equatable {
    /// No usable range (syntax not understood, several ranges, another unit): send the whole representation.
    case none
    /// Well-formed but outside the representation: 416.
    case unsatisfiable
    case range(ClosedRange<Int>)

    static func parse(_ field: String, size: Int) -> ByteRange {
        let trimmed = field.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .none }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .none }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        let digits = { (text: String) in !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        if first.isEmpty {
            // A suffix: the last N bytes.
            guard digits(last), let count = Int(last) else { return .none }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .range(max(0, size - count)...(size - 1))
        }
        guard digits(first), let start = Int(first) else { return .none }
        var end = size - 1
        if !last.isEmpty {
            guard digits(last), let given = Int(last) else { return .none }
            guard given >= start else { return .none }
            end = min(given, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .range(start...end)
    }
}
