import Foundation
import Testing

@testable import Gateway

@Suite("Media files: confined to their folder, typed by the server, single byte ranges", .timeLimit(.minutes(2)))
struct MediaTests {
    static func prepare(_ broker: TestBroker) throws {
        let media = broker.directory + "/media"
        try FileManager.default.createDirectory(atPath: media + "/pub", withIntermediateDirectories: true)
        try Data("0123456789".utf8).write(to: URL(fileURLWithPath: media + "/pub/clip.txt"))
        try Data("<script>alert(1)</script>".utf8).write(to: URL(fileURLWithPath: media + "/pub/page.html"))
        // Links that lead out of the folder: to a directory and to a file.
        try FileManager.default.createSymbolicLink(atPath: media + "/etc", withDestinationPath: "/etc")
        try FileManager.default.createSymbolicLink(
            atPath: media + "/db",
            withDestinationPath: broker.directory + "/broker.sqlite"
        )
        // A link that stays inside is followed.
        try FileManager.default.createSymbolicLink(
            atPath: media + "/alias.txt",
            withDestinationPath: media + "/pub/clip.txt"
        )
    }

    @Test("Symbolic links out of the folder, NUL and control characters, directories: refused")
    func confinement() async throws {
        try await TestBroker.run { broker in
            try Self.prepare(broker)
            let passwd = try await broker.send(.GET, "/media/etc/passwd", user: nil)
            #expect(passwd.status == 404)
            #expect(!passwd.text.contains("root:"))
            #expect(try await broker.send(.GET, "/media/db", user: nil).status == 404)
            let alias = try await broker.send(.GET, "/media/alias.txt", user: nil)
            #expect(alias.status == 200 && alias.text == "0123456789")
            // A NUL used to cut the path short, serving clip.txt with the type of .html.
            let nul = try await broker.send(.GET, "/media/pub/clip.txt%00.html", user: nil)
            #expect(nul.status == 400)
            #expect(nul.headers["content-type"].first == "application/problem+json")
            #expect(try await broker.send(.GET, "/media/pub/clip%0A.txt", user: nil).status == 400)
            // A directory is not redirected (the redirect used to drop the /media prefix).
            let directory = try await broker.send(.GET, "/media/pub", user: nil)
            #expect(directory.status == 404)
            #expect(directory.headers["location"].isEmpty)
            #expect(try await broker.send(.GET, "/media/pub/../../broker.sqlite", user: nil).status != 200)
            let post = try await broker.send(.POST, "/media/pub/clip.txt", user: nil, body: "x")
            #expect(post.status == 405)
            #expect(post.headers["allow"].first == "GET, HEAD")
        }
    }

    @Test("A file larger than one piece streams whole over HTTP/2 and HTTP/1.1", arguments: [false, true])
    func largeFile(http1: Bool) async throws {
        try await TestBroker.run(http1Only: http1) { broker in
            let bytes = Data((0..<(3 << 20) + 17).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try bytes.write(to: URL(fileURLWithPath: broker.directory + "/media/large.bin"))
            let reply = try await broker.send(.GET, "/media/large.bin", user: nil)
            #expect(reply.status == 200)
            #expect(reply.body == bytes)
            #expect(reply.headers["content-length"].first == String(bytes.count))
            let head = try await broker.send(.HEAD, "/media/large.bin", user: nil)
            #expect(head.headers["content-length"].first == String(bytes.count) && head.body.isEmpty)
            let tail = try await broker.send(.GET, "/media/large.bin", user: nil, headers: [("Range", "bytes=-100000")])
            #expect(tail.status == 206 && tail.body == bytes.suffix(100_000))
        }
    }

    @Test("The server picks the type and forbids sniffing and script")
    func types() async throws {
        try await TestBroker.run { broker in
            try Self.prepare(broker)
            let text = try await broker.send(.GET, "/media/pub/clip.txt", user: nil)
            #expect(text.headers["content-type"].first == "text/plain; charset=utf-8")
            #expect(text.headers["x-content-type-options"].first == "nosniff")
            #expect(text.headers["content-security-policy"].first?.contains("sandbox") == true)
            let page = try await broker.send(.GET, "/media/pub/page.html", user: nil)
            #expect(page.headers["content-type"].first == "application/octet-stream")
        }
    }

    @Test(
        "Byte ranges follow RFC 9110 over HTTP/2 and HTTP/1.1",
        arguments: [false, true]
    )
    func ranges(http1: Bool) async throws {
        try await TestBroker.run(http1Only: http1) { broker in
            try Self.prepare(broker)
            func get(_ range: String) async throws -> TestBroker.Reply {
                try await broker.send(.GET, "/media/pub/clip.txt", user: nil, headers: [("Range", range)])
            }
            let suffix = try await get("bytes=-3")
            #expect(suffix.status == 206 && suffix.text == "789")
            #expect(suffix.headers["content-range"].first == "bytes 7-9/10")
            let open = try await get("bytes=8-")
            #expect(open.status == 206 && open.text == "89")
            let clipped = try await get("bytes=5-100")
            #expect(clipped.status == 206 && clipped.text == "56789")
            let past = try await get("bytes=10-")
            #expect(past.status == 416)
            #expect(past.headers["content-range"].first == "bytes */10")
            #expect(past.headers["content-type"].first == "application/problem+json")
            #expect(past.text.contains("problem:range-not-satisfiable"), "\(past.text)")
            // Invalid or several ranges are ignored: the whole file.
            for ignored in ["bytes=5-2", "bytes=x-3", "items=0-1", "bytes=0-1,4-5"] {
                let whole = try await get(ignored)
                #expect(whole.status == 200 && whole.text == "0123456789", "\(ignored)")
            }
            // The connection is still in order after all that (a stray byte used to corrupt the next answer).
            let after = try await broker.send(.GET, "/media/pub/clip.txt", user: nil)
            #expect(after.status == 200 && after.text == "0123456789")
        }
    }

    @Test(
        "ByteRange parsing",
        arguments: [
            ("bytes=0-0", 10, ByteRange.range(0...0)), ("bytes=-10", 10, .range(0...9)),
            ("bytes=-20", 10, .range(0...9)),
            ("bytes=-0", 10, .unsatisfiable), ("bytes=0-", 0, .unsatisfiable), ("bytes= 2 - 3 ", 10, .range(2...3)),
            ("bytes=3", 10, .none), ("", 10, .none),
        ]
    )
    func parse(field: String, size: Int, expected: ByteRange) {
        #expect(ByteRange.parse(field, size: size) == expected)
    }
}
