import Engine
import Hummingbird
import MultipartKit
import NIOCore

/// A `multipart/form-data` body read as it arrives, for a form of small text fields followed by one file: the
/// fields are gathered first (at most `fieldsLimit` bytes in all, headers included), then the file's bytes are
/// handed on piece by piece, so a large file is never held whole. Fields after the file are not read.
final class MultipartUpload<Body: AsyncSequence> where Body.Element == ByteBuffer {
    struct File {
        var field: String
        var filename: String
        var contentType: String?
    }

    private(set) var fields: [String: String] = [:]
    private(set) var file: File?

    private let parser: MultipartParser
    private var body: Body.AsyncIterator
    private let fieldsLimit: Int
    private var fieldBytes = 0

    /// What the parser reported since it was last asked.
    private var headers: [String: String] = [:]
    private var value: [UInt8] = []
    private var part: PartKind = .fields
    private var pending: [[UInt8]] = []
    private var fileEnded = false
    private var bodyEnded = false
    private var overflow = false

    private enum PartKind {
        case fields, file, ignored
    }

    /// nil when `contentType` is not `multipart/form-data` with a usable boundary.
    init?(contentType: String?, body: Body, fieldsLimit: Int = 64 * 1024) {
        guard let boundary = Self.boundary(contentType) else { return nil }
        self.parser = MultipartParser(boundary: boundary)
        self.body = body.makeAsyncIterator()
        self.fieldsLimit = fieldsLimit
        parser.onHeader = { [unowned self] name, value in self.header(name, value) }
        parser.onBody = { [unowned self] buffer in self.bodyBytes(&buffer) }
        parser.onPartComplete = { [unowned self] in self.partComplete() }
    }

    /// The `boundary` parameter of a `multipart/form-data` content type: 1 to 70 characters.
    static func boundary(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        let parameters = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parameters.first?.lowercased() == "multipart/form-data" else { return nil }
        for parameter in parameters.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            var boundary = String(pair[1])
            if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 {
                boundary = String(boundary.dropFirst().dropLast())
            }
            return (1...70).contains(boundary.utf8.count) ? boundary : nil
        }
        return nil
    }

    /// Reads until the file's part begins (or the body ends): afterwards `fields` and `file` are known.
    func readFields() async throws {
        while file == nil, !bodyEnded {
            try await feed()
        }
    }

    /// The file's bytes, in the pieces they arrived in; ends with the file's part.
    var fileParts: FileParts { FileParts(upload: self) }

    struct FileParts: AsyncSequence {
        typealias Element = [UInt8]
        let upload: MultipartUpload

        struct AsyncIterator: AsyncIteratorProtocol {
            let upload: MultipartUpload
            mutating func next() async throws -> [UInt8]? { try await upload.nextFilePart() }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(upload: upload) }
    }

    private func nextFilePart() async throws -> [UInt8]? {
        while pending.isEmpty {
            if fileEnded || file == nil { return nil }
            guard !bodyEnded else { throw EngineError(.invalidInput, "the upload ended before its file did") }
            try await feed()
        }
        return pending.removeFirst()
    }

    private func feed() async throws {
        guard let chunk = try await body.next() else {
            bodyEnded = true
            return
        }
        do {
            try parser.execute(chunk)
        } catch {
            throw EngineError(.invalidInput, "the upload is not valid multipart/form-data")
        }
        if overflow {
            throw EngineError(.tooLarge, "a form's fields are at most \(fieldsLimit) bytes")
        }
    }

    // MARK: The parser's callbacks

    private func header(_ name: String, _ value: String) {
        if file == nil { count(name.utf8.count + value.utf8.count) }
        headers[name.lowercased()] = value
    }

    private func bodyBytes(_ buffer: inout ByteBuffer) {
        beginIfNeeded()
        switch part {
        case .fields:
            count(buffer.readableBytes)
            if !overflow { value += buffer.readableBytesView }
        case .file:
            if !fileEnded, buffer.readableBytes > 0 { pending.append(Array(buffer.readableBytesView)) }
        case .ignored:
            break
        }
        buffer.moveReaderIndex(to: buffer.writerIndex)
    }

    private func partComplete() {
        beginIfNeeded()
        switch part {
        case .fields:
            if let name = Self.parameter("name", in: headers["content-disposition"]), fields[name] == nil {
                fields[name] = String(decoding: value, as: UTF8.self)
            }
        case .file:
            fileEnded = true
        case .ignored:
            break
        }
        headers = [:]
        value = []
        part = .fields
        begun = false
    }

    private var begun = false

    /// Decides, once a part's headers are complete, whether it is a field, the file, or ignored.
    private func beginIfNeeded() {
        guard !begun else { return }
        begun = true
        let disposition = headers["content-disposition"]
        if let filename = Self.parameter("filename", in: disposition) {
            if file == nil {
                file = File(
                    field: Self.parameter("name", in: disposition) ?? "",
                    filename: filename,
                    contentType: headers["content-type"]
                )
                part = .file
            } else {
                part = .ignored
            }
        } else {
            part = file == nil ? .fields : .ignored
        }
    }

    private func count(_ bytes: Int) {
        fieldBytes += bytes
        if fieldBytes > fieldsLimit { overflow = true }
    }

    /// A parameter of a `Content-Disposition` header (`name="…"`, quoted or not; `\"` inside quotes).
    static func parameter(_ key: String, in header: String?) -> String? {
        guard let header else { return nil }
        var rest = Substring(header)
        while let semicolon = rest.firstIndex(of: ";") {
            rest = rest[rest.index(after: semicolon)...].drop(while: { $0 == " " || $0 == "\t" })
            guard let equals = rest.firstIndex(of: "=") else { return nil }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            var after = rest[rest.index(after: equals)...]
            var value = ""
            if after.first == "\"" {
                after = after.dropFirst()
                var escaped = false
                var end = after.endIndex
                for index in after.indices {
                    let character = after[index]
                    if escaped {
                        value.append(character)
                        escaped = false
                    } else if character == "\\" {
                        escaped = true
                    } else if character == "\"" {
                        end = index
                        break
                    } else {
                        value.append(character)
                    }
                }
                rest = end < after.endIndex ? after[after.index(after: end)...] : after[after.endIndex...]
            } else {
                let end = after.firstIndex(of: ";") ?? after.endIndex
                value = after[..<end].trimmingCharacters(in: .whitespaces)
                rest = after[end...]
            }
            if name == key { return value }
        }
        return nil
    }
}
