import Engine
import Foundation
import NIOCore
import Testing

@testable import Gateway

/// The console's catalog and media pages over HTTP (the browser test drives the same forms): edits, additions and
/// imports go through the admin API's rules; uploads are `multipart/form-data` read as they arrive, their CSRF
/// field checked before any byte is written.
@Suite("Console catalog and media", .timeLimit(.minutes(3)))
struct ConsoleCatalogTests {
    /// A `multipart/form-data` body: `fields` in order, then the file (or the file first when `fileFirst`).
    static func multipart(
        _ fields: [(String, String)],
        file: (name: String, type: String, bytes: [UInt8]),
        fileFirst: Bool = false,
        boundary: String = "----impulse-test-7MA4YWxkTrZu0gW"
    ) -> [UInt8] {
        var fieldBytes: [UInt8] = []
        for (name, value) in fields {
            fieldBytes += Array(
                "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8
            )
        }
        let fileBytes =
            Array(
                ("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(file.name)\"\r\n"
                    + "Content-Type: \(file.type)\r\n\r\n").utf8
            ) + file.bytes + Array("\r\n".utf8)
        let parts = fileFirst ? fileBytes + fieldBytes : fieldBytes + fileBytes
        return parts + Array("--\(boundary)--\r\n".utf8)
    }

    func upload(
        _ broker: TestBroker,
        _ session: ConsoleClient,
        _ body: [UInt8],
        plain: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestBroker.Reply {
        do {
            return try await broker.send(
                .POST,
                "/t/acme/console/media",
                user: nil,
                headers: [
                    ("Cookie", session.cookie),
                    ("Content-Type", "multipart/form-data; boundary=----impulse-test-7MA4YWxkTrZu0gW"),
                ],
                bytes: body,
                plain: plain,
                timeout: .seconds(60)
            )
        } catch {
            // Names the upload that failed: one HTTP/2 upload of this suite ran out of its deadline once on CI.
            Issue.record(error, "upload of \(body.count) bytes (plain: \(plain))", sourceLocation: sourceLocation)
            throw error
        }
    }

    static func jpeg(_ size: Int) -> [UInt8] {
        [0xFF, 0xD8, 0xFF, 0xE0] + (0..<(size - 4)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
    }

    func title(_ broker: TestBroker, _ id: String) async throws -> String? {
        try await broker.send(.GET, "/t/acme/admin/v1/impulses/\(id)", user: "root").json["title"] as? String
    }

    @Test("Editing, adding and importing impulses follow the admin API's rules; a refused form keeps what was typed")
    func catalog() async throws {
        try await TestBroker.run { broker in
            let session = try await ConsoleClient.signIn(broker)
            let edit = try await broker.send(
                .GET,
                "/t/acme/console/catalog/acme-1/edit",
                user: nil,
                headers: [("Cookie", session.cookie)]
            )
            #expect(edit.status == 200 && edit.text.contains(#"value="Title acme-1""#))
            var fields: [(String, String)] = [
                ("language", "EN"), ("title", "<b>Breathe</b> & stretch"),
                ("descriptionShort", "Short"), ("description", "Line one\nLine two"), ("duration", "7"),
                ("action", "do"), ("lifeArea", "sleep"), ("single", "true"),
                ("imageURLs", "/media/acme/acme-1.jpg\nhttps://cdn.example.com/acme-1.png"),
            ]
            // The image it links is not in the media folder: refused, with the form as typed, escaped.
            let refused = try await session.post("/t/acme/console/catalog/acme-1/edit", fields)
            #expect(refused.status == 422 && refused.text.contains("is not in the media folder"), "\(refused.text)")
            #expect(refused.text.contains("&lt;b&gt;Breathe&lt;/b&gt; &amp; stretch") && !refused.text.contains("<b>B"))
            #expect(try await title(broker, "acme-1") == "Title acme-1")
            // Once the file is uploaded (through the console), the same form saves.
            let uploaded = try await upload(
                broker,
                session,
                Self.multipart([("csrf", session.csrf)], file: ("acme-1.jpg", "image/jpeg", Self.jpeg(300_000)))
            )
            #expect(uploaded.status == 201 && uploaded.text.contains("acme-1.jpg is uploaded"), "\(uploaded.text)")
            let saved = try await session.post("/t/acme/console/catalog/acme-1/edit", fields)
            #expect(saved.status == 200 && saved.text.contains("acme-1 is saved"), "\(saved.text)")
            #expect(try await title(broker, "acme-1") == "<b>Breathe</b> & stretch")
            // A number that is not one, and a missing CSRF token.
            fields[4] = ("duration", "seven")
            let notNumber = try await session.post("/t/acme/console/catalog/acme-1/edit", fields)
            #expect(notNumber.status == 422 && notNumber.text.contains("whole numbers"))
            let forged = try await session.post("/t/acme/console/catalog/acme-1/edit", fields, csrf: false)
            #expect(forged.status == 403)
            // A new impulse, then one whose id exists is a replacement.
            fields[4] = ("duration", "3")
            let added = try await session.post(
                "/t/acme/console/catalog/new",
                fields + [("workingID", "acme-new")]
            )
            #expect(added.status == 200 && added.text.contains("acme-new is added"), "\(added.text)")
            #expect(try await title(broker, "acme-new") == "<b>Breathe</b> & stretch")
            // An import: all or nothing.
            let item = { (id: String, title: String, area: String) in
                #"{"workingID": "\#(id)", "language": "EN", "title": "\#(title)", "descriptionShort": "s", "#
                    + #""description": "d", "duration": 4, "action": "read", "single": true, "lifeArea": "\#(area)"}"#
            }
            let bad = try await session.post(
                "/t/acme/console/catalog/import",
                [
                    ("document", #"{"items": [\#(item("acme-x", "X", "sleep")), \#(item("acme-y", "Y", "nowhere"))]}"#)
                ]
            )
            #expect(bad.status == 422 && bad.text.contains("Nothing was imported") && bad.text.contains("item 1"))
            #expect(try await broker.send(.GET, "/t/acme/admin/v1/impulses/acme-x", user: "root").status == 404)
            let imported = try await session.post(
                "/t/acme/console/catalog/import",
                [
                    (
                        "document",
                        #"{"items": [\#(item("acme-x", "X", "sleep")), \#(item("acme-new", "Renamed", "work"))]}"#
                    )
                ]
            )
            #expect(imported.status == 200 && imported.text.contains("1 added, 1 replaced"), "\(imported.text)")
            #expect(try await title(broker, "acme-new") == "Renamed")
            // The audit trail names the console's actor.
            let audit = try await broker.send(
                .GET,
                "/t/acme/console/audit",
                user: nil,
                headers: [("Cookie", session.cookie)]
            )
            #expect(audit.text.contains("impulse.put") && audit.text.contains("catalog.import"))
            #expect(audit.text.contains("media.upload"))
        }
    }

    @Test(
        "Media upload (HTTP/2 over TLS, HTTP/1.1 in plain) reads the CSRF field before the file, writes whole files only, and deletes unless linked",
        arguments: [false, true]
    )
    func media(plain: Bool) async throws {
        try await TestBroker.run(plain: plain) { broker in
            let session = try await ConsoleClient.signIn(broker)
            let folder = broker.directory + "/media/acme"
            func onDisk() -> [String] {
                ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
            }
            let bytes = MediaUploadTests.png(700_000, seed: 9)
            // The token after the file: refused before a byte is written.
            let late = try await upload(
                broker,
                session,
                Self.multipart([("csrf", session.csrf)], file: ("late.png", "image/png", bytes), fileFirst: true),
                plain: plain
            )
            #expect(late.status == 403)
            #expect(onDisk().isEmpty)
            // Content that is not the kind its name says; a kind not taken.
            let fake = try await upload(
                broker,
                session,
                Self.multipart([("csrf", session.csrf)], file: ("fake.png", "image/png", Self.jpeg(5000))),
                plain: plain
            )
            #expect(fake.status == 422 && fake.text.contains("is not image/png"), "\(fake.text)")
            let svg = try await upload(
                broker,
                session,
                Self.multipart([("csrf", session.csrf)], file: ("x.svg", "image/svg+xml", Array("<svg/>".utf8))),
                plain: plain
            )
            #expect(svg.status >= 400 && svg.status < 500)
            #expect(onDisk().isEmpty, "\(onDisk())")
            // A large file arrives whole and is served; its browser-stated type does not matter.
            let good = try await upload(
                broker,
                session,
                Self.multipart([("csrf", session.csrf)], file: ("calm.png", "application/octet-stream", bytes)),
                plain: plain
            )
            #expect(good.status == 201 && good.text.contains("calm.png is uploaded"), "\(good.text.prefix(400))")
            #expect(good.version == (plain ? .http1_1 : .http2))
            #expect(onDisk() == ["calm.png"])
            #expect(FileManager.default.contents(atPath: folder + "/calm.png") == Data(bytes))
            let page = try await broker.send(
                .GET,
                "/t/acme/console/media",
                user: nil,
                headers: [("Cookie", session.cookie)]
            )
            #expect(page.status == 200 && page.text.contains("/media/acme/calm.png"))
            // Not a multipart body at all.
            let form = try await session.post("/t/acme/console/media", plain: plain)
            #expect(form.status == 415)
            // Linked by an impulse in use: kept; once unlinked, deleted.
            let linked = try await session.post(
                "/t/acme/console/catalog/new",
                [
                    ("workingID", "calm"), ("language", "EN"), ("title", "Calm"),
                    ("duration", "2"), ("action", "read"), ("lifeArea", "sleep"), ("single", "true"),
                    ("imageURLs", "/media/acme/calm.png"),
                ],
                plain: plain
            )
            #expect(linked.status == 200, "\(linked.text)")
            let kept = try await session.post(
                "/t/acme/console/media/calm.png/delete",
                [],
                plain: plain
            )
            #expect(kept.status == 409 && kept.text.contains("impulse calm links"), "\(kept.text)")
            _ = try await session.post(
                "/t/acme/console/catalog/calm/retired",
                [("retired", "true")],
                plain: plain
            )
            let deleted = try await session.post(
                "/t/acme/console/media/calm.png/delete",
                [],
                plain: plain
            )
            #expect(deleted.status == 200 && deleted.text.contains("calm.png is deleted"))
            #expect(onDisk().isEmpty)
        }
    }

    typealias Reader = MultipartUpload<AsyncStream<ByteBuffer>>

    static func stream(_ pieces: [ByteBuffer]) -> AsyncStream<ByteBuffer> {
        AsyncStream { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
    }

    @Test("Multipart bodies: boundaries, quoted parameters, fields before the file, a bound on the fields")
    func multipartReader() async throws {
        #expect(Reader.boundary("multipart/form-data; boundary=abc") == "abc")
        #expect(Reader.boundary(#"Multipart/Form-Data; charset=utf-8; boundary="a b""#) == "a b")
        #expect(Reader.boundary("multipart/form-data; boundary=") == nil)
        #expect(Reader.boundary("multipart/form-data; boundary=" + String(repeating: "x", count: 71)) == nil)
        #expect(Reader.boundary("application/x-www-form-urlencoded") == nil)
        #expect(Reader.parameter("filename", in: #"form-data; name="file"; filename="a \"b\".png""#) == #"a "b".png"#)
        #expect(Reader.parameter("name", in: #"form-data; filename="x"; name=file"#) == "file")
        let body = Self.multipart(
            [("csrf", "token"), ("note", "two\r\nlines")],
            file: ("f.png", "image/png", Array(repeating: 0x41, count: 100_000)),
            boundary: "B0undary"
        )
        // Fed in 777-byte pieces, as a network would.
        let pieces = stride(from: 0, to: body.count, by: 777).map {
            ByteBuffer(bytes: body[$0..<min($0 + 777, body.count)])
        }
        let upload = try #require(
            MultipartUpload(contentType: "multipart/form-data; boundary=B0undary", body: Self.stream(pieces))
        )
        try await upload.readFields()
        #expect(upload.fields == ["csrf": "token", "note": "two\r\nlines"])
        #expect(upload.file?.filename == "f.png" && upload.file?.field == "file")
        var received: [UInt8] = []
        for try await part in upload.fileParts { received += part }
        #expect(received == Array(repeating: 0x41, count: 100_000))
        // Fields beyond the bound are refused before the file is read.
        let big = Self.multipart(
            [("csrf", String(repeating: "t", count: 70_000))],
            file: ("f.png", "image/png", [1, 2, 3]),
            boundary: "B0undary"
        )
        let bounded = try #require(
            MultipartUpload(
                contentType: "multipart/form-data; boundary=B0undary",
                body: Self.stream([ByteBuffer(bytes: big)])
            )
        )
        await #expect(throws: EngineError.self) { try await bounded.readFields() }
    }
}
