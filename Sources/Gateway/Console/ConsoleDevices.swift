import Engine
import Foundation
import Hummingbird

/// The devices page: the tenant's devices by platform and state, this node's APNs and FCM connections for the tenant
/// (as its `/inspect` view shows them) and, for whoever manages them, the uploaded credentials of both.
extension Console {
    func addDevicesRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/t/:tenant/console/devices") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in try await devicesPage(visit)
            }
        }
        router.post("/t/:tenant/console/devices/credentials") { request, context in
            try await form(request, context) { visit, fields in try await upload(visit, fields, channel: .apns) }
        }
        router.post("/t/:tenant/console/devices/fcm-credentials") { request, context in
            try await form(request, context) { visit, fields in try await upload(visit, fields, channel: .fcm) }
        }
        for (path, channel) in [("credentials", PushChannel.apns), ("fcm-credentials", .fcm)] {
            router.post("/t/:tenant/console/devices/\(path)/:credential/delete") { request, context in
                let id = try AdminAPI.parameter("credential", context)
                return try await form(request, context) { visit, _ in
                    let tenant = try requireTenant(visit)
                    do {
                        try await administration.deleteAPNsCredential(
                            tenant: tenant.id,
                            id: id,
                            channel: channel,
                            by: visit.actor
                        )
                        await changed(tenant.id, [.apnsCredentials])
                        return try await devicesPage(visit, notice: "The credential is deleted.")
                    } catch let error as EngineError {
                        return try await devicesPage(visit, error: error.message, status: Problem(error).status)
                    }
                }
            }
        }
    }

    /// A credential uploaded from the form, as the admin API's upload: checked, sealed, pending until a push proves
    /// it. A signing key (`.p8`; a PKCS#12 certificate goes over the admin API) or an FCM service account's JSON key.
    func upload(_ visit: Visit, _ fields: [String: String], channel: PushChannel) async throws -> Response {
        let tenant = try requireTenant(visit)
        let upload: APNsCredentialUpload =
            channel == .fcm
            ? .serviceAccount(json: Data((fields["serviceAccount"] ?? "").utf8))
            : .token(
                teamID: (fields["teamID"] ?? "").trimmingCharacters(in: .whitespaces),
                keyID: (fields["keyID"] ?? "").trimmingCharacters(in: .whitespaces),
                privateKeyPEM: fields["privateKey"] ?? ""
            )
        do {
            let credential = try await administration.uploadAPNsCredential(
                tenant: tenant.id,
                upload,
                inspector: vault,
                by: visit.actor
            )
            await changed(tenant.id, [.apnsCredentials])
            let notice =
                channel == .fcm
                ? "The service account \(credential.topics.first ?? "") of \(credential.teamID ?? "") is uploaded: "
                    + "Android pushes try it first, and it replaces the one in use once FCM accepts a push made with it."
                : "The signing key \(credential.keyID ?? "") is uploaded: pushes try it first, and it replaces the one "
                    + "in use once APNs accepts a push made with it."
            return try await devicesPage(visit, notice: notice, status: .created)
        } catch let error as EngineError {
            return try await devicesPage(visit, error: error.message, status: Problem(error).status)
        }
    }

    func devicesPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let zone = tenant.defaultTimeZone
        let tallies = try await administration.deviceTallies(tenant: tenant.id, by: visit.actor)
        var values: [String: Any] = [
            "devices": tallies.map { tally -> [String: String] in
                [
                    "platform": tally.channel == .fcm ? "Android (FCM)" : "iPhone (APNs)",
                    "topic": tally.topic, "environment": tally.environment.rawValue, "active": "\(tally.active)",
                    "quarantined": "\(tally.quarantined)", "removed": "\(tally.removed)",
                ]
            },
            "topic": tenant.apnsTopic,
        ]
        if let view = try await inspector.view(tenant: tenant.id).tenants.first {
            values["queued"] = "\(view.queued)"
            if let paused = view.configurationError { values["paused"] = paused }
            values["pools"] = view.apns.map { pool -> [String: Any] in
                var row: [String: Any] = [
                    "identity": pool.identity == "tenant" ? "the programme's own" : "the broker's default",
                    "environment": pool.environment,
                    "open": "\(pool.connections.filter { $0.state == "open" }.count)",
                    "draining": "\(pool.connections.filter { $0.state != "open" }.count)",
                    "streams": "\(pool.connections.reduce(0) { $0 + $1.streamsInFlight })"
                        + " of \(pool.connections.reduce(0) { $0 + Int($1.streamLimit) })",
                    "jwt": pool.jwtAgeSeconds.map { Self.duration(Double($0)) } ?? "–",
                    "opened": "\(pool.connectionsOpened)", "goAways": "\(pool.goAways)",
                ]
                if let unreachable = pool.unreachable {
                    row["unreachable"] =
                        "unreachable for \(Self.duration(Double(unreachable.forSeconds))) "
                        + "(\(unreachable.failedAttempts) failed attempts)"
                        + (unreachable.lastError.map { ": \($0)" } ?? "")
                }
                return row
            }
            if let fcm = view.fcm {
                var row: [String: Any] = [
                    "identity": ["uploaded": "the programme's uploaded one", "tenant": "the programme's own"][
                        fcm.identity
                    ] ?? "the broker's default",
                    "project": fcm.project,
                    "open": "\(fcm.connections.filter { $0.state == "open" }.count)",
                    "streams": "\(fcm.connections.reduce(0) { $0 + $1.streamsInFlight })"
                        + " of \(fcm.connections.reduce(0) { $0 + Int($1.streamLimit) })",
                    "credential": fcm.credential + (fcm.credentialError.map { ": \($0)" } ?? ""),
                    "tokens": "\(fcm.tokenExchanges)", "opened": "\(fcm.connectionsOpened)",
                ]
                if let paused = fcm.pausedForSeconds { row["paused"] = Self.duration(Double(paused)) }
                if let unreachable = fcm.unreachable {
                    row["unreachable"] =
                        "unreachable for \(Self.duration(Double(unreachable.forSeconds))) "
                        + "(\(unreachable.failedAttempts) failed attempts)"
                        + (unreachable.lastError.map { ": \($0)" } ?? "")
                }
                values["fcm"] = row
            }
        }
        if try await administration.managesAPNsCredentials(tenant: tenant.id, by: visit.actor) {
            values["managesCredentials"] = true
            values["credentials"] = try await administration.apnsCredentials(tenant: tenant.id, by: visit.actor).map {
                credential -> [String: String] in
                [
                    "kind": credential.kind == .token ? "signing key" : "certificate",
                    "identity": [credential.teamID.map { "team \($0)" }, credential.keyID.map { "key \($0)" }]
                        .compactMap { $0 }.joined(separator: ", "),
                    "topics": credential.topics.isEmpty
                        ? "every app of the team" : credential.topics.joined(separator: ", "),
                    "expires": credential.notAfter.map { Self.time($0, zone: zone) } ?? "–",
                    "state": { () -> String in
                        let (state, error) = vault.shownState(credential)
                        return state + (error.map { ": \($0)" } ?? "")
                    }(),
                    "fingerprint": String(credential.fingerprint.prefix(16)),
                    "created": Self.time(credential.createdAt, zone: zone),
                    "activated": credential.activatedAt.map { Self.time($0, zone: zone) } ?? "–",
                    "deleteAction": "/t/\(tenant.id)/console/devices/credentials/\(Self.segment(credential.id))/delete",
                    "csrf": visit.session.csrfToken,
                ]
            }
            values["fcmCredentials"] = try await administration.apnsCredentials(
                tenant: tenant.id,
                channel: .fcm,
                by: visit.actor
            ).map { credential -> [String: String] in
                [
                    "project": credential.teamID ?? "", "account": credential.topics.first ?? "",
                    "state": { () -> String in
                        let (state, error) = vault.shownState(credential)
                        return state + (error.map { ": \($0)" } ?? "")
                    }(),
                    "fingerprint": String(credential.fingerprint.prefix(16)),
                    "created": Self.time(credential.createdAt, zone: zone),
                    "activated": credential.activatedAt.map { Self.time($0, zone: zone) } ?? "–",
                    "deleteAction":
                        "/t/\(tenant.id)/console/devices/fcm-credentials/\(Self.segment(credential.id))/delete",
                    "csrf": visit.session.csrfToken,
                ]
            }
            values["csrf"] = visit.session.csrfToken
            values["uploadAction"] = "/t/\(tenant.id)/console/devices/credentials"
            values["fcmUploadAction"] = "/t/\(tenant.id)/console/devices/fcm-credentials"
        }
        let base = "/t/\(tenant.id)/console/devices"
        return html(
            layout(
                title: "Devices and push",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("devices", values),
                notice: notice,
                error: error
            ),
            status
        )
    }
}
