import Engine
import Foundation
import Gateway
import NIOHTTP1
import Testing

/// The admin API refuses members its bodies do not have, naming them (a misspelt member used to answer 201 with
/// nothing set); the app's routes keep their leniency.
@Suite("Admin API: unknown members are refused")
struct StrictInputTests {
    func asOperator(
        _ broker: TestBroker,
        _ method: HTTPMethod,
        _ path: String,
        _ body: String
    ) async throws
        -> TestBroker.Reply
    {
        try await broker.send(
            method,
            path,
            user: nil,
            headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
            body: body
        )
    }

    @Test("A misspelt member answers 400 unknown-member naming it, and nothing is written", arguments: [false, true])
    func unknownMembers(http1: Bool) async throws {
        try await TestBroker.run(http1Only: http1) { broker in
            let user = try await asOperator(
                broker,
                .POST,
                "/t/acme/admin/v1/users",
                #"{"username": "tess", "password": "t3ss-pass", "timezone": "Europe/Vienna"}"#
            )
            #expect(user.status == 400, "\(user.text)")
            #expect(user.headers["content-type"].first == "application/problem+json")
            #expect(user.text.contains("unknown-member") && user.text.contains("timezone"), "\(user.text)")
            #expect(try await broker.store.user(tenant: Fixture.acme, username: "tess") == nil)
            let tenant = try await asOperator(broker, .PATCH, "/admin/v1/tenants/acme", #"{"quietHour": null}"#)
            #expect(tenant.status == 400, "\(tenant.text)")
            let settings = try await asOperator(broker, .PATCH, "/admin/v1/tenants/acme", #"{"nmae": "Acme Two"}"#)
            #expect(settings.status == 400 && settings.text.contains("nmae"), "\(settings.text)")
            #expect(try await broker.store.tenant(Fixture.acme)?.name != "Acme Two")
            // Inside a member that is an object of its own (found by schemathesis: a member named "\u{8e}" in
            // learnedTiming answered 200), and a null there, which would read as "leave it".
            for body in [
                #"{"learnedTiming": {"holdoutShare": 0.2, "windowMinutes": 30, "\u008e": []}}"#,
                #"{"learnedTiming": {"enabled": null}}"#,
            ] {
                let nested = try await asOperator(broker, .PATCH, "/admin/v1/tenants/acme", body)
                #expect(nested.status == 400, "\(body): \(nested.text)")
                #expect(nested.text.contains("learnedTiming."), "\(nested.text)")
            }
            let timing = try #require(try await broker.store.tenant(Fixture.acme)?.learnedTiming)
            #expect(timing.windowMinutes != 30 && timing.holdoutShare != 0.2, "\(timing)")
            let known = try await asOperator(
                broker,
                .PATCH,
                "/admin/v1/tenants/acme",
                #"{"learnedTiming": {"holdoutShare": 0.2, "windowMinutes": 30}}"#
            )
            #expect(known.status == 200, "\(known.text)")
            // The right spelling is taken.
            let fixed = try await asOperator(
                broker,
                .POST,
                "/t/acme/admin/v1/users",
                #"{"username": "tess", "password": "t3ss-pass", "timeZone": "Europe/Vienna"}"#
            )
            #expect(fixed.status == 201, "\(fixed.text)")
            // The app's routes keep their leniency: an unknown member there is ignored.
            let app = try await broker.send(.PUT, "/v1/me/preferences", body: #"{"timeZone": "Asia/Tokyo", "x": 1}"#)
            #expect(app.status == 200, "\(app.text)")
        }
    }
}
