import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import Testing

/// `PUT /t/{tenant}/admin/v1/media/{name}`: a tenant's media uploaded over the admin API, checked (name, type,
/// first bytes, size, quota), written whole or not at all, served at `/media/{tenant}/{name}`, linked by the
/// catalog, deleted unless linked, erased with the tenant.
@Suite("Admin API: media uploads", .timeLimit(.minutes(3)))
struct MediaUploadTests {
    static let pngHeader: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]

    /// A file that starts like a PNG, `size` bytes long, of varied bytes.
    static func png(_ size: Int, seed: UInt8 = 1) -> [UInt8] {
        Self.pngHeader + (0..<(size - pngHeader.count)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
    }

    func upload(
        _ broker: TestBroker,
        _ name: String,
        _ bytes: [UInt8],
        type: String = "image/png",
        tenant: String = "acme",
        user: String = "root"
    ) async throws -> TestBroker.Reply {
        try await broker.send(
            .PUT,
            "/t/\(tenant)/admin/v1/media/\(name)",
            user: user,
            headers: [("Content-Type", type)],
            bytes: bytes,
            timeout: .seconds(60)
        )
    }

    /// The names in the tenant's folder, hidden files too (what an aborted upload would leave).
    func filesOnDisk(_ broker: TestBroker, tenant: String = "acme") -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: broker.directory + "/media/" + tenant)) ?? []).sorted()
    }

    @Test(
        "Uploaded past the body limit, served as sent, replaced whole, linked by an impulse, deleted once unlinked",
        arguments: TestDatabase.allCases
    )
    func lifecycle(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            // 300 KiB: more than four times the admin API's 64 KiB body limit, read as it arrives.
            let file = Self.png(300 * 1024)
            let created = try await upload(broker, "logo.png", file)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.version == .http2)
            #expect(created.headers["location"].first == "/media/acme/logo.png")
            #expect(created.json["size"] as? Int == file.count && created.json["contentType"] as? String == "image/png")
            #expect((created.json["url"] as? String ?? "").hasSuffix("/media/acme/logo.png"))

            let served = try await broker.send(.GET, "/media/acme/logo.png", user: nil)
            #expect(served.status == 200 && served.headers["content-type"].first == "image/png")
            #expect(Array(served.body) == file)

            let replacement = Self.png(2_000, seed: 7)
            let replaced = try await upload(broker, "logo.png", replacement)
            #expect(replaced.status == 200, "\(replaced.text)")
            #expect(Array(try await broker.send(.GET, "/media/acme/logo.png", user: nil).body) == replacement)

            let listed = try await broker.send(.GET, "/t/acme/admin/v1/media", user: "root")
            let items = listed.json["items"] as? [[String: Any]] ?? []
            #expect(items.map { $0["name"] as? String } == ["logo.png"] && items.first?["size"] as? Int == 2_000)
            #expect(filesOnDisk(broker) == ["logo.png"])

            // An impulse links it: the catalog accepts the link, and the file cannot be deleted while it is in use.
            let item =
                #"{"workingID": "look", "language": "EN", "title": "Look", "descriptionShort": "S", "description": "D", "duration": 3, "action": "do", "single": true, "lifeArea": "fitness", "imageURLs": ["/media/acme/logo.png"]}"#
            let impulse = try await broker.send(
                .PUT,
                "/t/acme/admin/v1/impulses/look",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: item
            )
            #expect(impulse.status == 201, "\(impulse.text)")
            let linked = try await broker.send(.DELETE, "/t/acme/admin/v1/media/logo.png", user: "root")
            #expect(linked.status == 409 && linked.text.contains("look"), "\(linked.text)")
            let retire = try await broker.send(
                .PATCH,
                "/t/acme/admin/v1/impulses/look",
                user: "root",
                headers: [("Content-Type", "application/json")],
                body: #"{"retired": true}"#
            )
            #expect(retire.status == 200)
            #expect(try await broker.send(.DELETE, "/t/acme/admin/v1/media/logo.png", user: "root").status == 204)
            #expect(try await broker.send(.GET, "/media/acme/logo.png", user: nil).status == 404)
            #expect(try await broker.send(.DELETE, "/t/acme/admin/v1/media/logo.png", user: "root").status == 404)

            let audit = try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 50)
            #expect(audit.filter { $0.action == "media.upload" }.count == 2)
            #expect(audit.filter { $0.action == "media.delete" }.map(\.target) == ["media:logo.png"])
        }
    }

    @Test("Refused uploads write nothing: wrong type, content, name; too large; over the quota; others' tenants")
    func refusals() async throws {
        try await TestBroker.run(maxUploadSize: 1 << 20, mediaQuota: 1_500_000) { broker in
            // The Content-Type is not the name's, the bytes are not a PNG, the name is not allowed.
            let wrongType = try await upload(broker, "a.png", Self.png(100), type: "image/jpeg")
            #expect(wrongType.status == 415, "\(wrongType.text)")
            #expect(wrongType.headers["content-type"].first == "application/problem+json")
            let notPNG = try await upload(broker, "a.png", Array("<script>alert(1)</script>".utf8))
            #expect(notPNG.status == 422 && notPNG.text.contains("not image/png"), "\(notPNG.text)")
            let large = [UInt8](repeating: 0x41, count: 200_000)
            #expect(try await upload(broker, "b.png", large).status == 422)
            for name in [
                ".hidden.png", "evil.svg", "page.html", "noextension", String(repeating: "x", count: 130) + ".png",
            ] {
                let reply = try await upload(broker, name, Self.png(100), type: "image/png")
                #expect(reply.status == 422, "\(name): \(reply.status) \(reply.text)")
            }
            #expect(try await upload(broker, "empty.png", []).status == 422)

            // Larger than maxUploadSize: 413.
            let tooLarge = try await upload(broker, "huge.png", Self.png(2 << 20))
            #expect(tooLarge.status == 413, "\(tooLarge.text)")

            // The quota counts what the tenant already has.
            #expect(try await upload(broker, "first.png", Self.png(900_000)).status == 201)
            let over = try await upload(broker, "second.png", Self.png(700_000))
            #expect(over.status == 413 && over.text.contains("quota"), "\(over.text)")
            // Replacing a file counts only the new one.
            #expect(try await upload(broker, "first.png", Self.png(1_000_000)).status == 200)

            // Another tenant's admin sees no such tenant; a plain user may not upload.
            let stranger = try await upload(broker, "x.png", Self.png(100), tenant: "globex")
            #expect(stranger.status == 401 || stranger.status == 404, "\(stranger.text)")
            #expect(try await upload(broker, "x.png", Self.png(100), user: "alice").status == 403)

            // Nothing of the refused ones is on disk, not even a hidden partial file.
            #expect(filesOnDisk(broker) == ["first.png"])
            #expect(filesOnDisk(broker, tenant: "globex").isEmpty)
            #expect(try await broker.send(.GET, "/media/acme/a.png", user: nil).status == 404)
        }
    }

    @Test("Over HTTP/1.1 the upload streams through Hummingbird; deleting the tenant erases its folder")
    func http1AndTenantErasure() async throws {
        try await TestBroker.run(http1Only: true) { broker in
            let file = Self.png(200 * 1024)
            let reply = try await upload(broker, "pic.png", file)
            #expect(reply.status == 201 && reply.version == .http1_1, "\(reply.text)")
            #expect(Array(try await broker.send(.GET, "/media/acme/pic.png", user: nil).body) == file)

            let erased = try await broker.send(
                .DELETE,
                "/admin/v1/tenants/acme?confirm=acme",
                user: nil,
                headers: [("Authorization", "Bearer \(Fixture.operatorToken)")]
            )
            #expect(erased.status == 200, "\(erased.text)")
            #expect((erased.json["erased"] as? [String: Any])?["mediaFiles"] as? Int == 1, "\(erased.text)")
            #expect(!FileManager.default.fileExists(atPath: broker.directory + "/media/acme"))
        }
    }
}
