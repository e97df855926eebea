import Foundation
import NIOCore

extension APNsSimulator {
    /// The control API, on the simulator's own listener:
    /// - `GET /_simulator/accepted[?offset=N&limit=M]`: `{"accepted": N, "rejected": N, "pushes": [...]}`, the
    ///   record paged (by default the first 1000); `DELETE` clears it;
    /// - `PUT /_simulator/faults`: a `SimulatorFaults` object (replaces the current one);
    /// - `PUT /_simulator/tokens/{token}`: `{"state": "valid" | "unregistered" | "otherTopic" | "otherEnvironment",
    ///   "since": <epoch seconds>}`;
    /// - `PUT /_simulator/stream-limit`: `{"limit": N}`, announced on every connection;
    /// - `POST /_simulator/goaway`: `{"reason": "Shutdown"}` on every connection.
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
            json(status, ["error": detail])
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
        case ("PUT", "/_simulator/faults"):
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .secondsSince1970
            guard let faults = try? decoder.decode(SimulatorFaults.self, from: body) else {
                return problem(400, "body must be a faults object")
            }
            setFaults(faults)
            request.respond(status: 204)
        case ("PUT", let path) where path.hasPrefix("/_simulator/tokens/"):
            let token = String(path.dropFirst("/_simulator/tokens/".count))
            let tokenState: SimulatedTokenState
            switch object["state"] as? String {
            case "valid": tokenState = .valid
            case "unregistered":
                let since = (object["since"] as? Double).map { Date(timeIntervalSince1970: $0) } ?? now()
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
            goAwayAll(reason: object["reason"] as? String ?? "Shutdown")
            request.respond(status: 204)
        default:
            problem(404, "unknown control path")
        }
    }
}
