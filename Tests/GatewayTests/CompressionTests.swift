import Foundation
import TestSupport
import Testing

@testable import Gateway

/// Compressed answers (issue 20, item 12): JSON and property lists of 512 bytes or more, when asked for.
@Suite("Response compression", .timeLimit(.minutes(3)))
struct CompressionTests {
    /// Decompresses with Python's zlib (a decoder independent of the one that compressed).
    static func decompress(_ data: Data, gzip: Bool) async throws -> Data {
        try await offThePool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            let module = gzip ? "gzip" : "zlib"
            process.arguments = [
                "-c", "import sys, \(module); sys.stdout.buffer.write(\(module).decompress(sys.stdin.buffer.read()))",
            ]
            let input = Pipe()
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            input.fileHandleForWriting.write(data)
            try input.fileHandleForWriting.close()
            let result = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw CocoaError(.coderReadCorrupt) }
            return result
        }
    }

    @Test("A list of ten impulses goes out gzipped or deflated when asked, with its own ETag; small answers do not")
    func compressedLists() async throws {
        try await TestBroker.run { broker in
            let plain = try await broker.send(.GET, "/v1/impulses?limit=10")
            #expect(plain.status == 200 && plain.headers["Content-Encoding"].isEmpty)
            #expect(plain.headers["Vary"].first?.contains("Accept-Encoding") == true)
            let gzip = try await broker.send(
                .GET,
                "/v1/impulses?limit=10",
                headers: [("Accept-Encoding", "gzip, deflate")]
            )
            #expect(gzip.status == 200)
            #expect(gzip.headers["Content-Encoding"].first == "gzip")
            #expect(gzip.headers["Vary"].first?.contains("Accept-Encoding") == true)
            // The same content (the list also carries fetch times, which the first request set).
            let unpacked = try await Self.decompress(gzip.body, gzip: true)
            let again = try await broker.send(.GET, "/v1/impulses?limit=10")
            #expect(unpacked == again.body)
            #expect(gzip.body.count * 2 < unpacked.count, "\(gzip.body.count) of \(unpacked.count)")
            let gzipTag = try #require(gzip.headers["ETag"].first)
            #expect(gzipTag != again.headers["ETag"].first)
            #expect(gzipTag.hasSuffix("-gz\""))
            // Each coding validates its own representation.
            let cached = try await broker.send(
                .GET,
                "/v1/impulses?limit=10",
                headers: [("Accept-Encoding", "gzip"), ("If-None-Match", gzipTag)]
            )
            #expect(cached.status == 304)
            let identity = try await broker.send(.GET, "/v1/impulses?limit=10", headers: [("If-None-Match", gzipTag)])
            #expect(identity.status == 200)
            let deflate = try await broker.send(
                .GET,
                "/CurrentImpulse",
                headers: [("Accept-Encoding", "deflate, gzip;q=0.5")]
            )
            #expect(deflate.headers["Content-Encoding"].first == "deflate")
            let current = try await broker.send(.GET, "/CurrentImpulse")
            #expect(try await Self.decompress(deflate.body, gzip: false) == current.body)
            // Property lists too.
            let plist = try await broker.send(
                .GET,
                "/CurrentImpulse",
                headers: [("Accept", "application/x-plist"), ("Accept-Encoding", "gzip")]
            )
            #expect(plist.headers["Content-Encoding"].first == "gzip")
            #expect(
                String(decoding: try await Self.decompress(plist.body, gzip: true), as: UTF8.self).contains("<plist")
            )
            // Refused or too small: as is.
            let refused = try await broker.send(
                .GET,
                "/CurrentImpulse",
                headers: [("Accept-Encoding", "gzip;q=0, identity")]
            )
            #expect(refused.headers["Content-Encoding"].isEmpty && refused.body == current.body)
            let small = try await broker.send(.GET, "/v1/reminders", headers: [("Accept-Encoding", "gzip")])
            #expect(small.status == 200 && small.headers["Content-Encoding"].isEmpty, "\(small.text)")
        }
    }

    @Test("Accept-Encoding is read with its weights")
    func negotiation() {
        #expect(ContentCoding.negotiate(nil) == nil)
        #expect(ContentCoding.negotiate("gzip, deflate") == .gzip)
        #expect(ContentCoding.negotiate("deflate") == .deflate)
        #expect(ContentCoding.negotiate("gzip;q=0.2, deflate;q=0.8") == .deflate)
        #expect(ContentCoding.negotiate("*") == .gzip)
        #expect(ContentCoding.negotiate("gzip;q=0, deflate;q=0") == nil)
        #expect(ContentCoding.negotiate("br, identity") == nil)
        #expect(ContentCoding.negotiate("GZIP") == .gzip)
    }
}
