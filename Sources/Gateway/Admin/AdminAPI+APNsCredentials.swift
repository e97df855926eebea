import Engine
import Foundation
import HTTPTypes
import Hummingbird

/// An uploaded APNs credential as the admin API shows it: what it is and where it stands, never its secret.
struct APNsCredentialBody: Encodable, Sendable {
    var id: String
    var kind: String
    var teamID: String?
    var keyID: String?
    var topics: [String]
    var notAfter: String?
    var fingerprint: String
    var state: String
    var createdAt: String
    var activatedAt: String?
    var lastError: String?

    init(_ credential: StoredAPNsCredential, vault: APNsCredentialVault) {
        id = credential.id
        kind = credential.kind.rawValue
        teamID = credential.teamID
        keyID = credential.keyID
        topics = credential.topics
        notAfter = credential.notAfter.map(rfc3339)
        fingerprint = credential.fingerprint
        (state, lastError) = vault.shownState(credential)
        createdAt = rfc3339(credential.createdAt)
        activatedAt = credential.activatedAt.map(rfc3339)
    }
}

/// `POST .../apns-credentials`: a signing key (`teamID`, `keyID`, `privateKey` as the .p8 file's PEM text) or a
/// certificate (`pkcs12`, the bundle in base64, and its `passphrase`).
struct APNsCredentialUploadBody: Decodable, Sendable {
    var teamID: String?
    var keyID: String?
    var privateKey: String?
    var pkcs12: String?
    var passphrase: String?

    func upload() throws -> APNsCredentialUpload {
        switch (teamID, keyID, privateKey, pkcs12) {
        case (let team?, let key?, let pem?, nil):
            return .token(teamID: team, keyID: key, privateKeyPEM: pem)
        case (nil, nil, nil, let bundle?):
            guard let bytes = Data(base64Encoded: bundle, options: .ignoreUnknownCharacters), !bytes.isEmpty else {
                throw Problem(.unprocessableContent, "invalid-input", "pkcs12 is the bundle in base64")
            }
            return .certificate(pkcs12: Array(bytes), passphrase: passphrase ?? "")
        default:
            throw Problem(
                .unprocessableContent,
                "invalid-input",
                "send teamID, keyID and privateKey (a .p8 key), or pkcs12 and passphrase (a certificate)"
            )
        }
    }
}

/// An uploaded FCM service account as the admin API shows it: what it is and where it stands, never its key.
struct FCMCredentialBody: Encodable, Sendable {
    var id: String
    var projectID: String
    var clientEmail: String
    var privateKeyID: String?
    var fingerprint: String
    var state: String
    var createdAt: String
    var activatedAt: String?
    var lastError: String?

    init(_ credential: StoredAPNsCredential, vault: APNsCredentialVault) {
        id = credential.id
        projectID = credential.teamID ?? ""
        clientEmail = credential.topics.first ?? ""
        privateKeyID = credential.keyID
        fingerprint = credential.fingerprint
        (state, lastError) = vault.shownState(credential)
        createdAt = rfc3339(credential.createdAt)
        activatedAt = credential.activatedAt.map(rfc3339)
    }
}

/// `POST .../fcm-credentials`: `{"serviceAccount": <the JSON key file>}`, the file as an object or as its text.
struct FCMCredentialUploadBody: Decodable, Sendable {
    var json: Data

    enum CodingKeys: String, CodingKey { case serviceAccount }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let text = try? container.decode(String.self, forKey: .serviceAccount) {
            json = Data(text.utf8)
        } else {
            // Google's key files hold strings only.
            let object = try container.decode([String: String].self, forKey: .serviceAccount)
            json = try JSONEncoder().encode(object)
        }
    }
}

extension AdminAPI {
    /// A tenant's uploaded credentials of both channels: list, upload (pending until a push proves it), delete.
    func addCredentialRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        addCredentialRoutes(
            router,
            api: api,
            scheme: scheme,
            channel: .apns,
            shown: { APNsCredentialBody($0, vault: $1) },
            upload: { request in
                try await Self.decode(api, APNsCredentialUploadBody.self, schema: "APNsCredentialUpload", from: request)
                    .upload()
            }
        )
        addCredentialRoutes(
            router,
            api: api,
            scheme: scheme,
            channel: .fcm,
            shown: { FCMCredentialBody($0, vault: $1) },
            upload: { request in
                .serviceAccount(
                    json: try await Self.decode(
                        api,
                        FCMCredentialUploadBody.self,
                        schema: "FCMCredentialUpload",
                        from: request
                    ).json
                )
            }
        )
    }

    /// One channel's routes: `/apns-credentials` or `/fcm-credentials`, each credential shown as `Body`.
    private func addCredentialRoutes<Body: Encodable & Sendable>(
        _ router: Router<BrokerRequestContext>,
        api: RESTAPI,
        scheme: String,
        channel: PushChannel,
        shown: @escaping @Sendable (StoredAPNsCredential, APNsCredentialVault) -> Body,
        upload: @escaping @Sendable (Request) async throws -> APNsCredentialUpload
    ) {
        let path = "/\(channel.rawValue)-credentials"
        let name = channel == .apns ? "APNs credential" : "FCM credential"
        tenantResource(
            router,
            path,
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    let credentials = try await administration.apnsCredentials(
                        tenant: tenant.id,
                        channel: channel,
                        by: actor
                    )
                    return try Representation.response(
                        PageBody(items: credentials.map { shown($0, vault) }, next: nil),
                        for: request
                    )
                },
                .post: { request, _, actor, tenant in
                    let credential = try await administration.uploadAPNsCredential(
                        tenant: tenant.id,
                        try await upload(request),
                        inspector: vault,
                        by: actor
                    )
                    await changed(tenant.id, [.apnsCredentials])
                    var response = try Representation.response(
                        shown(credential, vault),
                        for: request,
                        status: .created
                    )
                    response.headers[.location] = "/t/\(tenant.id)/admin/v1\(path)/\(credential.id)"
                    return response
                },
            ]
        )
        tenantResource(
            router,
            path + "/:credential",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let id = try Self.parameter("credential", context)
                    let credentials = try await administration.apnsCredentials(
                        tenant: tenant.id,
                        channel: channel,
                        by: actor
                    )
                    guard let credential = credentials.first(where: { $0.id == id }) else {
                        throw Problem(.notFound, "not-found", "no such \(name)")
                    }
                    return try Representation.response(shown(credential, vault), for: request)
                },
                .delete: { _, context, actor, tenant in
                    try await administration.deleteAPNsCredential(
                        tenant: tenant.id,
                        id: try Self.parameter("credential", context),
                        channel: channel,
                        by: actor
                    )
                    await changed(tenant.id, [.apnsCredentials])
                    return Response(status: .noContent)
                },
            ]
        )
    }
}
