import AsyncHTTPClient
import Engine
import Foundation
import Gateway
import Testing

/// `POST /t/{tenant}/admin/v1/user-imports`: CSV and JSON lines, per row or all or nothing, idempotent by username,
/// read as the body arrives (past the admin API's body limit, over HTTP/2 and HTTP/1.1), on both stores.
@Suite("Admin API: user imports")
struct UserImportTests {
    func importUsers(
        _ broker: TestBroker,
        _ body: String,
        type: String = "text/csv",
        mode: String? = nil
    ) async throws -> TestBroker.Reply {
        try await broker.send(
            .POST,
            "/t/acme/admin/v1/user-imports" + (mode.map { "?mode=\($0)" } ?? ""),
            user: "root",
            headers: [("Content-Type", type)],
            body: body,
            timeout: .seconds(120)
        )
    }

    func rows(_ reply: TestBroker.Reply) -> [[String: Any]] {
        let report = (reply.json["report"] as? [String: Any]) ?? reply.json
        return report["rows"] as? [[String: Any]] ?? []
    }

    @Test("Rows with the password hash a user has already are unchanged: no write, no audit entry")
    func sameHashUnchanged() async throws {
        try await TestBroker.run { broker in
            let hash = try await Authenticator.hash("hashed-pass", cost: 4)
            let other = try await Authenticator.hash("other-pass", cost: 4)
            let csv = "username,passwordHash,language\nkim,\(hash),DE\nlou,\(hash),FR\n"
            #expect(try await importUsers(broker, csv).json["created"] as? Int == 2)
            let entries = try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 100).count
            let again = try await importUsers(broker, csv)
            #expect(again.json["unchanged"] as? Int == 2 && again.json["updated"] as? Int == 0, "\(again.text)")
            #expect(try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 100).count == entries)
            // Another hash is a change, and it takes effect.
            let changed = try await importUsers(broker, "username,passwordHash\nkim,\(other)\n")
            #expect(changed.json["updated"] as? Int == 1, "\(changed.text)")
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "kim", password: "other-pass").status == 200)
        }
    }

    @Test("A CSV saved by Excel (UTF-8 with a byte-order mark) is read as the same file without it")
    func byteOrderMark() async throws {
        try await TestBroker.run { broker in
            let reply = try await importUsers(broker, "\u{FEFF}username,password\r\njo,j0-pass-word\r\n")
            #expect(reply.status == 200 && reply.json["created"] as? Int == 1, "\(reply.text)")
            #expect(rows(reply).first?["username"] as? String == "jo", "\(reply.text)")
        }
    }

    @Test(
        "CSV per row: created, rejected with reasons, then the same file again changes nothing",
        arguments: TestDatabase.allCases
    )
    func csvPerRow(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let hash = try await Authenticator.hash("hashed-pass", cost: 4)
            let csv = [
                "username,password,passwordHash,language,timeZone,weekdays,work,enabled",
                "dora,d0ra-pass,,DE,Europe/Vienna,1;2;3,30,true",
                "\"eve, the second\",,\(hash),,,,,",
                "\"frank \"\"the tank\"\"\",fr4nk-pass,,,Mars/Olympus,,,",
                "dora,other-pass,,,,,,",
                "gus,,,,,,,",
                "hal,h4l-pass,,,,,150,",
                "ida,\"pass\nword\",,,,,,no",
                "",
            ].joined(separator: "\r\n")
            let reply = try await importUsers(broker, csv)
            #expect(reply.status == 200, "\(reply.text)")
            #expect(reply.version == .http2)
            #expect(reply.json["created"] as? Int == 3 && reply.json["rejected"] as? Int == 4, "\(reply.text)")
            let byLine = Dictionary(uniqueKeysWithValues: rows(reply).map { ($0["line"] as? Int ?? 0, $0) })
            #expect(byLine[2]?["result"] as? String == "created")
            #expect(byLine[3]?["username"] as? String == "eve, the second")
            #expect((byLine[4]?["reason"] as? String ?? "").contains("time zone"), "\(reply.text)")
            #expect((byLine[5]?["reason"] as? String ?? "").contains("line 2"), "\(reply.text)")
            #expect((byLine[6]?["reason"] as? String ?? "").contains("needs a password"), "\(reply.text)")
            #expect(byLine[7]?["result"] as? String == "rejected")
            #expect(byLine[8]?["username"] as? String == "ida" && byLine[8]?["result"] as? String == "created")

            // They exist as the rows said, and sign in with the password or the imported hash's.
            let dora = try #require(try await broker.store.user(tenant: Fixture.acme, username: "dora"))
            #expect(
                dora.language == "DE" && dora.preferences.weekdays.days == [1, 2, 3] && dora.lifeAreas[.work] == 30
            )
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "dora", password: "d0ra-pass").status == 200)
            #expect(
                try await broker.send(.GET, "/t/acme/v1/me", user: "eve, the second", password: "hashed-pass").status
                    == 200
            )
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "ida")?.enabled == false)
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "gus") == nil)
            let audit = try await broker.store.auditEntries(tenant: Fixture.acme, before: nil, limit: 50)
            #expect(audit.filter { $0.action == "user.create" }.count == 3)

            // Idempotent by username: without passwords, a second run finds nothing to change.
            let again = try await importUsers(broker, "username,language,timeZone\ndora,DE,Europe/Vienna\n")
            #expect(again.status == 200 && again.json["unchanged"] as? Int == 1, "\(again.text)")
            let changed = try await importUsers(broker, "username,language\ndora,DE\n\"eve, the second\",FR\n")
            #expect(changed.json["unchanged"] as? Int == 1 && changed.json["updated"] as? Int == 1, "\(changed.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "eve, the second")?.language == "FR")

            // Not a CSV of users: a header naming an unknown column, an unknown mode, another media type.
            let unknown = try await importUsers(broker, "username,shoeSize\nzed,44\n")
            #expect(unknown.status == 422 && unknown.text.contains("shoeSize"), "\(unknown.text)")
            #expect(try await importUsers(broker, "").status == 422)
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "zed") == nil)
            #expect(try await importUsers(broker, "username\n", mode: "some").status == 400)
            #expect(try await importUsers(broker, "{}", type: "application/json").status == 415)
            // Another tenant's admin sees no such tenant; a plain user may not import.
            let stranger = try await broker.send(
                .POST,
                "/t/globex/admin/v1/user-imports",
                user: "root",
                headers: [("Content-Type", "text/csv")],
                body: "username,password\nmallory,x\n"
            )
            #expect(stranger.status == 401 || stranger.status == 404, "\(stranger.text)")
            let plain = try await broker.send(
                .POST,
                "/t/acme/admin/v1/user-imports",
                headers: [("Content-Type", "text/csv")],
                body: "username,password\nmallory,x\n"
            )
            #expect(plain.status == 403, "\(plain.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "mallory") == nil)
        }
    }

    @Test(
        "JSON lines all or nothing: one bad row writes nothing; fixed, every row is written",
        arguments: TestDatabase.allCases
    )
    func jsonLinesAllOrNothing(_ database: TestDatabase) async throws {
        try await TestBroker.run(database: database) { broker in
            let good = (1...30).map {
                #"{"username": "user-\#($0)", "password": "pass-\#($0)", "lifeAreas": {"sleep": 10}}"#
            }
            var lines = good
            lines.insert(#"{"username": "bad", "password": "x", "deliveryTime": "25:00"}"#, at: 10)
            lines.insert(#"{"username": "worse", "password": null}"#, at: 20)
            lines.insert("not json", at: 25)
            let refused = try await importUsers(
                broker,
                lines.joined(separator: "\n"),
                type: "application/x-ndjson",
                mode: "all-or-nothing"
            )
            #expect(refused.status == 422, "\(refused.text)")
            #expect(refused.headers["content-type"].first == "application/problem+json")
            #expect(refused.json["type"] as? String == "urn:impulse-broker:problem:import-rejected")
            #expect(rows(refused).map { $0["line"] as? Int ?? 0 } == [11, 21, 26], "\(refused.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "user-1") == nil)

            let accepted = try await importUsers(
                broker,
                good.joined(separator: "\n") + "\n",
                type: "application/x-ndjson",
                mode: "all-or-nothing"
            )
            #expect(accepted.status == 200 && accepted.json["created"] as? Int == 30, "\(accepted.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "user-30")?.lifeAreas[.sleep] == 10)
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "user-7", password: "pass-7").status == 200)
        }
    }

    @Test("A body far past the admin API's limit is read as it arrives; past the upload limit it is refused (413)")
    func largeImports() async throws {
        let hash = try await Authenticator.hash("bulk-pass", cost: 4)
        let lines = (0..<6_000).map { #"{"username": "bulk-\#($0)", "passwordHash": "\#(hash)", "language": "EN"}"# }
        let body = lines.joined(separator: "\n")
        #expect(body.utf8.count > 10 * 64 * 1024)
        for http1Only in [false, true] {
            try await TestBroker.run(http1Only: http1Only, maxUploadSize: 1 << 20) { broker in
                let reply = try await importUsers(broker, body, type: "application/x-ndjson")
                #expect(reply.status == 200 && reply.json["created"] as? Int == 6_000, "\(reply.text.prefix(300))")
                #expect(reply.version == (http1Only ? .http1_1 : .http2))
                #expect(
                    try await broker.send(.GET, "/t/acme/v1/me", user: "bulk-5999", password: "bulk-pass").status == 200
                )
                let tooLarge = try await importUsers(
                    broker,
                    body + "\n" + body,
                    type: "application/x-ndjson",
                    mode: "all-or-nothing"
                )
                #expect(tooLarge.status == 413, "\(tooLarge.text.prefix(300))")
                // The rest of the API still answers on the same client.
                #expect(try await broker.send(.GET, "/t/acme/v1/me").status == 200)
            }
        }
    }

    @Test("A per-row import cut short (413) has written its first batches, and their users' cached logins end then")
    func cutShortImportDropsCachedLogins() async throws {
        let hash = try await Authenticator.hash("bulk-pass", cost: 4)
        let rows = ["username,passwordHash,enabled", "alice,,false"] + (0..<1_000).map { "cut-\($0),\(hash)," }
        let body = rows.joined(separator: "\n")
        #expect(body.utf8.count > 64 * 1024)
        try await TestBroker.run(maxUploadSize: 64 * 1024) { broker in
            // Alice's login is verified and cached.
            #expect(try await broker.send(.GET, "/t/acme/v1/me").status == 200)
            let reply = try await importUsers(broker, body)
            #expect(reply.status == 413, "\(reply.text.prefix(300))")
            // The first batch, alice disabled among it, was written before the body went past the limit.
            #expect(try await broker.send(.GET, "/t/acme/v1/me", user: "cut-0", password: "bulk-pass").status == 200)
            let after = try await broker.send(.GET, "/t/acme/v1/me")
            #expect(after.status == 403, "\(after.text)")
        }
    }
}
