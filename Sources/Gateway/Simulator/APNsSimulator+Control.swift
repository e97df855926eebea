import Foundation
import NIOCore
import _CryptoExtras

extension APNsSimulator {
    /// The control API, on the simulator's own listener:
    /// - `GET /_simulator/accepted[?offset=N&limit=M]`: `{"accepted": N, "rejected": N, "pushes": [...]}`, the
    ///   record paged (by default the first 1000); `DELETE` clears it;
    /// - `PUT /_simulator/faults`: a `SimulatorFaults` object (replaces the current one);
    /// - `PUT /_simulator/tokens/{token}`: `{"state": "valid" | "unregistered" | "otherTopic" | "otherEnvironment",
    ///   "since": <epoch seconds>}`;
    /// - `PUT /_simulator/stream-limit`: `{"limit": N}`, announced on every connection;
    /// - `POST /_simulator/goaway`: `{"reason": "Shutdown"}` on every connection;
    /// - `GET /_simulator/fcm/accepted[?offset=N&limit=M]`: the FCM side's record, like APNs'; `DELETE` clears it;
    /// - `PUT /_simulator/fcm/accounts/{client_email}`: `{"project_id": "...", "public_key": "<PEM>"}`, a service
    ///   account the token endpoint then knows (a key file's `private_key` is taken too: only its public half is
    ///   kept).
    ///
    /// Every control request carries `Authorization: Bearer <controlToken>`; bad input gets a problem answer.
    func handleControl(_ request: HTTP2ServerRequest) {
        let message = request.message
        let target = message[":path"] ?? ""
        let path = String(target.prefix { $0 != "?" })
        let query = URLComponents(string: target)?.queryItems ?? []
        func parameter(_ name: String, _ fallback: Int) -> Int {
            query.first { $0.name == name }?.value.flatMap(Int.init) ?? fallback
        }
        let method = message[":method"] ?? ""
        let body = Data(message.body.readableBytesView)
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        func json(_ status: Int, _ value: some Encodable) {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .secondsSince1970
            encoder.outputFormatting = [.sortedKeys]
            let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
            request.respond(
                status: status,
                headers: [HTTP2Header("content-type", "application/json")],
                body: ByteBuffer(bytes: data)
            )
        }
        func problem(_ status: Int, _ detail: String) {
            let title = [400: "Bad Request", 401: "Unauthorized", 404: "Not Found"][status] ?? "Error"
            let data =
                (try? JSONSerialization.data(
                    withJSONObject: ["type": "about:blank", "title": title, "status": status, "detail": detail],
                    options: [.sortedKeys]
                )) ?? Data()
            request.respond(
                status: status,
                headers: [HTTP2Header("content-type", "application/problem+json")],
                body: ByteBuffer(bytes: data)
            )
        }
        guard let expected = configuration.controlToken,
            let presented = message["authorization"].flatMap(Self.bearerToken),
            Self.constantTimeEqual(presented, expected)
        else {
            return problem(401, "the control API needs Authorization: Bearer <the simulator's control token>")
        }
        switch (method, path) {
        case ("GET", "/_simulator/accepted"):
            struct Listing: Encodable {
                var accepted: Int
                var rejected: Int
                var pushes: [AcceptedPush]
            }
            let offset = max(0, parameter("offset", 0))
            let limit = min(max(0, parameter("limit", 1000)), 1000)
            let listing = state.withLock {
                Listing(
                    accepted: $0.acceptedCount,
                    rejected: $0.rejectedCount,
                    pushes: Array($0.accepted.dropFirst(offset).prefix(limit))
                )
            }
            json(200, listing)
        case ("DELETE", "/_simulator/accepted"):
            clearRecord()
            request.respond(status: 204)
        case ("GET", "/_simulator/fcm/accepted"):
            struct Listing: Encodable {
                var accepted: Int
                var rejected: Int
                var tokensIssued: Int
                var messages: [AcceptedFCMMessage]
            }
            let offset = max(0, parameter("offset", 0))
            let limit = min(max(0, parameter("limit", 1000)), 1000)
            let listing = state.withLock {
                Listing(
                    accepted: $0.fcmCounts.accepted,
                    rejected: $0.fcmCounts.rejected,
                    tokensIssued: $0.fcmCounts.tokensIssued,
                    messages: Array($0.fcmAccepted.dropFirst(offset).prefix(limit))
                )
            }
            json(200, listing)
        case ("DELETE", "/_simulator/fcm/accepted"):
            clearFCMRecord()
            request.respond(status: 204)
        case ("PUT", let path) where path.hasPrefix("/_simulator/fcm/accounts/"):
            let email = String(path.dropFirst("/_simulator/fcm/accounts/".count)).removingPercentEncoding ?? ""
            guard (3...320).contains(email.utf8.count), email.contains("@") else {
                return problem(400, "the account must be a client_email address")
            }
            guard let project = object["project_id"] as? String, (1...100).contains(project.utf8.count) else {
                return problem(400, "project_id must be a project id")
            }
            let publicKey: _RSA.Signing.PublicKey
            if let pem = object["public_key"] as? String, let key = try? _RSA.Signing.PublicKey(pemRepresentation: pem)
            {
                publicKey = key
            } else if let pem = object["private_key"] as? String,
                let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem)
            {
                publicKey = key.publicKey
            } else {
                return problem(400, "public_key (or private_key) must be an RSA key in PEM")
            }
            setFCMAccount(email, FCMSimulatedAccount(projectID: project, publicKey: publicKey))
            request.respond(status: 204)
        case ("PUT", "/_simulator/faults"):
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            let faults: SimulatorFaults
            do {
                faults = try decoder.decode(SimulatorFaults.self, from: body)
            } catch let DecodingError.dataCorrupted(context) {
                return problem(400, context.debugDescription)
            } catch let DecodingError.typeMismatch(_, context) {
                let member = context.codingPath.map(\.stringValue).joined(separator: ".")
                return problem(400, "\(member.isEmpty ? "the body" : member) has the wrong type")
            } catch {
                return problem(400, "body must be a faults object")
            }
            setFaults(faults)
            request.respond(status: 204)
        case ("PUT", let path) where path.hasPrefix("/_simulator/tokens/"):
            let token = String(path.dropFirst("/_simulator/tokens/".count))
            guard (1...4096).contains(token.utf8.count), token.utf8.allSatisfy({ $0 < 0x80 && $0 > 0x20 }) else {
                return problem(400, "the token must be 1-4096 printable ASCII characters")
            }
            let tokenState: SimulatedTokenState
            switch object["state"] as? String {
            case "valid": tokenState = .valid
            case "unregistered":
                let seconds = object["since"] as? Double
                if let seconds, !(seconds.isFinite && (0...1e11).contains(seconds)) {
                    return problem(400, "since must be epoch seconds")
                }
                let since = seconds.map { Date(timeIntervalSince1970: $0) } ?? now()
                tokenState = .unregistered(since: since)
            case "otherTopic": tokenState = .otherTopic
            case "otherEnvironment": tokenState = .otherEnvironment
            default: return problem(400, "state must be valid, unregistered, otherTopic or otherEnvironment")
            }
            setToken(token, tokenState)
            request.respond(status: 204)
        case ("PUT", "/_simulator/stream-limit"):
            guard let limit = object["limit"] as? Int, (1...100_000).contains(limit) else {
                return problem(400, "limit must be 1-100000")
            }
            setStreamLimit(UInt32(limit))
            request.respond(status: 204)
        case ("POST", "/_simulator/goaway"):
            let reason = object["reason"] as? String ?? "Shutdown"
            guard (1...100).contains(reason.utf8.count), reason.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                return problem(400, "reason must be 1-100 letters and digits")
            }
            goAwayAll(reason: reason)
            request.respond(status: 204)
        default:
            problem(404, "unknown control path")
        }
    }

    /// The token of an `Authorization: Bearer <token>` field (the scheme in any case, RFC 9110 section 11.1).
    static func bearerToken(_ field: String) -> String? {
        let parts = field.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }

    /// Compares in time that depends on the lengths only.
    static func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let (a, b) = (Array(lhs.utf8), Array(rhs.utf8))
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
