import Foundation
import Testing

@testable import Gateway

/// A signed-in console visitor over HTTP: the session cookie and its CSRF token (as a page's forms carry it).
struct ConsoleClient {
    let broker: TestBroker
    var cookie: String
    var csrf: String

    /// Signs in at `/t/{tenant}/console/sign-in`, or at `/console/sign-in` when `tenant` is nil.
    static func signIn(
        _ broker: TestBroker,
        tenant: String? = "acme",
        name: String = "root",
        password: String = Fixture.rootPassword
    ) async throws -> ConsoleClient {
        let opened = try await broker.send(
            .POST,
            tenant.map { "/t/\($0)/console/sign-in" } ?? "/console/sign-in",
            user: nil,
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: "name=\(encode(name))&password=\(encode(password))"
        )
        let cookie = try #require(ConsoleTests.cookie(opened), "sign-in as \(name): \(opened.status)")
        var client = ConsoleClient(broker: broker, cookie: cookie, csrf: "")
        let home = try await client.get(tenant.map { "/t/\($0)/console" } ?? "/console")
        client.csrf = try #require(csrf(in: home.text), "no CSRF token on \(name)'s first page")
        return client
    }

    /// A new operator account (through the admin API, with the operator token), signed in.
    static func signInOperator(_ broker: TestBroker, name: String = "ops") async throws -> ConsoleClient {
        let added = try await broker.send(
            .POST,
            "/admin/v1/operators",
            user: nil,
            headers: [("Authorization", "Bearer \(Fixture.operatorToken)"), ("Content-Type", "application/json")],
            body: #"{"name": "\#(name)", "password": "0ps-secret"}"#
        )
        #expect(added.status == 201, "\(added.text)")
        return try await signIn(broker, tenant: nil, name: name, password: "0ps-secret")
    }

    static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static func csrf(in html: String) -> String? {
        html.components(separatedBy: #"name="csrf" value=""#).dropFirst().first?.split(separator: "\"").first
            .map(String.init)
    }

    func get(_ path: String) async throws -> TestBroker.Reply {
        try await broker.send(.GET, path, user: nil, headers: [("Cookie", cookie)])
    }

    /// A form post with the session's CSRF token first (unless `csrf` is false).
    func post(
        _ path: String,
        _ fields: [(String, String)] = [],
        csrf: Bool = true,
        plain: Bool = false
    ) async throws -> TestBroker.Reply {
        let all = (csrf ? [("csrf", self.csrf)] : []) + fields
        return try await broker.send(
            .POST,
            path,
            user: nil,
            headers: [("Cookie", cookie), ("Content-Type", "application/x-www-form-urlencoded")],
            body: all.map { "\($0.0)=\(Self.encode($0.1))" }.joined(separator: "&"),
            plain: plain
        )
    }
}
