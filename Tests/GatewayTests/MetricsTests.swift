import AsyncHTTPClient
import Engine
import Foundation
import GRDB
import NIOCore
import TestSupport
import Testing

@testable import Gateway

@Suite("Metrics and inspection", .timeLimit(.minutes(2)))
struct MetricsTests {
    /// The value of the one sample whose line starts with `name{` and holds every label given.
    func sample(_ text: String, _ name: String, _ labels: [String: String]) -> Double? {
        let lines = text.split(separator: "\n").filter { line in
            line.hasPrefix(name + "{") && labels.allSatisfy { line.contains("\($0.key)=\"\($0.value)\"") }
        }
        guard lines.count == 1, let value = lines.first?.split(separator: " ").last else { return nil }
        return Double(value)
    }

    @Test("/metrics counts known traffic by route, status, tenant and outcome, behind its bearer token")
    func metrics() async throws {
        try await TestBroker.run(adminToken: "t0ken") { broker in
            #expect(try await broker.send(.GET, "/v1/impulses").status == 200)
            #expect(try await broker.send(.GET, "/v1/impulses?limit=2").status == 200)
            #expect(try await broker.send(.GET, "/v1/impulses", password: "wrong").status == 401)
            #expect(try await broker.send(.GET, "/v1/impulses/acme-2").status == 200)
            let token = String(repeating: "7a", count: 32)
            let registered = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "phone"}"#
            )
            #expect(registered.status == 204)
            let sent = try await broker.sendPush("command=send&impulse=acme-5&target=alice")
            #expect(sent.status == 200)
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.count == 1 })

            #expect(try await broker.admin("/metrics", token: nil).status == 401)
            #expect(try await broker.admin("/metrics", token: "wrong").status == 401)
            var text = ""
            // The push's outcome is counted when APNs answers; the simulator may have recorded it a moment before.
            let counted = try await eventually {
                text = try await broker.admin("/metrics", token: "t0ken").text
                return sample(
                    text,
                    "broker_push_sent_total",
                    ["tenant": "acme", "channel": "apns", "outcome": "accepted"]
                ) == 1
            }
            #expect(counted, "\(text)")
            let requests = "broker_rest_requests_total"
            #expect(
                sample(text, requests, ["route": "/v1/impulses", "method": "GET", "status": "200"]) == 2,
                "\(text)"
            )
            #expect(sample(text, requests, ["route": "/v1/impulses", "method": "GET", "status": "401"]) == 1)
            #expect(sample(text, requests, ["route": "/v1/impulses/{impulse}", "status": "200"]) == 1, "\(text)")
            #expect(sample(text, "broker_tokens_total", ["tenant": "acme", "event": "registered"]) == 1)
            #expect((sample(text, "broker_ledger_writes_total", ["kind": "assigned"]) ?? 0) >= 1)
            #expect((sample(text, "broker_ledger_writes_total", ["kind": "fetched"]) ?? 0) >= 1)
            #expect(text.contains("broker_apns_request_duration_seconds_count{tenant=\"acme\"} 1"), "\(text)")
            #expect(text.contains("broker_store_duration_seconds_count{operation=\"write\"}"))
            #expect(text.contains("broker_apns_connections{"))
            let memory = text.split(separator: "\n").first { $0.hasPrefix("broker_process_resident_memory_bytes ") }
            #expect((memory?.split(separator: " ").last.flatMap { Double($0) } ?? 0) > 1_000_000)
            // No user ids or usernames in any label.
            #expect(!text.contains("alice"))
        }
    }

    @Test("/inspect shows every tenant to the operator; a tenant admin's view shows only that tenant")
    func inspection() async throws {
        try await TestBroker.run(adminToken: "t0ken") { broker in
            #expect(try await broker.admin("/inspect", token: nil).status == 401)
            let token = String(repeating: "6b", count: 32)
            _ = try await broker.send(
                .POST,
                "/RegisterToken",
                body: #"{"DeviceToken": "\#(token)", "DeviceName": "p"}"#
            )
            _ = try await broker.sendPush("command=send&impulse=acme-5&target=alice")
            let simulator = try #require(broker.application.simulator)
            #expect(try await eventually { simulator.accepted.count == 1 })
            // The gateway has the answer (and the pool its verified connection) a moment after the simulator.
            let gateway = try #require(broker.application.pushGateway)
            #expect(try await eventually { await gateway.statistics.accepted == 1 })
            // The simulator raises the stream limit in a SETTINGS frame after that first success; it reaches the
            // client's connection a moment later.
            var all = try await broker.admin("/inspect", token: "t0ken")
            _ = try await eventually {
                all = try await broker.admin("/inspect", token: "t0ken")
                let pool = ((all.json["tenants"] as? [[String: Any]])?.first?["apns"] as? [[String: Any]])?.first
                return ((pool?["connections"] as? [[String: Any]])?.first?["streamLimit"] as? Int ?? 0) > 1
            }
            #expect(all.status == 200)
            let tenants = (all.json["tenants"] as? [[String: Any]])?.compactMap { $0["tenant"] as? String }
            #expect(tenants == ["acme", "globex"])
            #expect(all.json["node"] as? String == broker.store.nodeID)
            let acme = (all.json["tenants"] as? [[String: Any]])?.first
            #expect(acme?["queued"] as? Int == 0)
            let pool = (acme?["apns"] as? [[String: Any]])?.first
            #expect(pool?["identity"] as? String == "default")
            #expect((pool?["jwtAgeSeconds"] as? Int).map { $0 >= 0 && $0 < 60 } == true, "\(all.text)")
            let connection = (pool?["connections"] as? [[String: Any]])?.first
            #expect(connection?["state"] as? String == "open", "\(all.text)")
            #expect((connection?["streamLimit"] as? Int ?? 0) > 1)  // raised from 1 once a push succeeded

            let own = try await broker.send(.GET, "/v1/admin/inspect", user: "root")
            #expect(own.status == 200)
            let ownTenants = (own.json["tenants"] as? [[String: Any]])?.compactMap { $0["tenant"] as? String }
            #expect(ownTenants == ["acme"])
            #expect(!own.text.contains("globex"))
            #expect(own.json["scheduler"] == nil || own.json["scheduler"] is NSNull)
            #expect(try await broker.send(.GET, "/v1/admin/inspect").status == 403)  // alice is no admin
            #expect(try await broker.send(.GET, "/t/globex/v1/admin/inspect", user: "root").status == 401)
        }
    }

    @Test("A failing dispatch shows in /inspect and in the metrics while it lasts, and recovers")
    func schedulerFailing() async throws {
        try await TestBroker.run(
            scheduler: SchedulerConfiguration(pollInterval: .milliseconds(100)),
            adminToken: "t0ken",
            busyTimeout: .zero
        ) { broker in
            // A reminder due in a few seconds, then a lock that refuses the write of firing it. On a machine so
            // busy that the reminder fired before the lock was taken, the lock is let go and a later reminder tried.
            func fired() async throws -> Int? {
                let view = try await broker.admin("/inspect", token: "t0ken").json
                return ((view["scheduler"] as? [String: Any])?["statistics"] as? [String: Any])?["remindersFired"]
                    as? Int
            }
            var lock: SQLiteWriteLock?
            for delay: Double in [5, 15, 45] where lock == nil {
                let already = try await fired()
                #expect(try await broker.remind("acme-3", in: delay).status == 201)
                let taken = try await SQLiteWriteLock.take(path: broker.directory + "/broker.sqlite")
                if try await fired() == already { lock = taken } else { try await taken.release() }
            }
            let held = try #require(lock, "every reminder fired before the lock was taken")
            var view: [String: Any] = [:]
            let failing = try await eventually(seconds: 20) {
                view = try await broker.admin("/inspect", token: "t0ken").json
                return (view["scheduler"] as? [String: Any])?["failing"] != nil
            }
            #expect(failing, "\(view)")
            let shown = (view["scheduler"] as? [String: Any])?["failing"] as? [String: Any]
            #expect((shown?["consecutiveFailures"] as? Int ?? 0) >= 1)
            #expect(shown?["since"] is String)
            let metrics = try await broker.admin("/metrics", token: "t0ken").text
            #expect(
                metrics.split(separator: "\n").contains { $0.hasPrefix("broker_scheduler_failing 1") },
                "\(metrics)"
            )
            #expect(metrics.contains("broker_scheduler_failures_total"))
            try await held.release()
            let recovered = try await eventually(seconds: 40) {
                view = try await broker.admin("/inspect", token: "t0ken").json
                return (view["scheduler"] as? [String: Any]).map { $0["failing"] == nil } ?? false
            }
            #expect(recovered, "\(view)")
        }
    }

    @Test("An APNs client certificate's expiry is exported per identity as a Unix time")
    func apnsCertificateExpiry() async throws {
        let data = TestBroker.temporaryDirectory()
        let (certificate, key) = try SelfSignedCertificate.make(hostnames: ["provider.example"])
        try certificate.write(toFile: data + "/apns.crt", atomically: true, encoding: .utf8)
        try key.write(toFile: data + "/apns.key", atomically: true, encoding: .utf8)
        // Nothing listens at APNs' address: the expiry comes from the identity loaded at start.
        let config = """
            {"dataDirectory": "\(data)/broker", "listen": "127.0.0.1:0", "adminListen": "127.0.0.1:0",
             "adminToken": "t0ken", "scheduler": false,
             "apns": {"mode": "external", "production": "127.0.0.1:1",
                      "credential": {"certificate": "\(data)/apns.crt", "privateKey": "\(data)/apns.key"}}}
            """
        try config.write(toFile: data + "/broker.json", atomically: true, encoding: .utf8)
        let broker = try RunningBroker(["serve", "--config", data + "/broker.json"])
        defer { broker.terminate() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let text = try await HeavyTests.ClusterTests.adminGet(broker, "/metrics", client: client)
        let line = text.split(separator: "\n").first {
            $0.hasPrefix("broker_apns_certificate_expiry_timestamp_seconds{identity=\"default\"} ")
        }
        let exported = try #require(
            line.flatMap { Double($0.split(separator: " ").last ?? "") },
            "\(text.prefix(3000))"
        )
        let expiry = try #require(
            TLSFiles(certificatePath: data + "/apns.crt", privateKeyPath: data + "/apns.key").certificateExpiry()
        )
        #expect(exported == expiry.timeIntervalSince1970)
    }

    @Test("The listener's certificate expiry is exported as a Unix time, read from its file")
    func certificateExpiry() async throws {
        try await TestBroker.run(adminToken: "t0ken") { broker in
            let text = try await broker.admin("/metrics", token: "t0ken").text
            let line = text.split(separator: "\n").first {
                $0.hasPrefix("broker_tls_certificate_expiry_timestamp_seconds ")
            }
            let exported = try #require(line.flatMap { Double($0.split(separator: " ").last ?? "") }, "\(text)")
            let files = TLSFiles(
                certificatePath: broker.directory + "/tls/self-signed.crt",
                privateKeyPath: broker.directory + "/tls/self-signed.key"
            )
            let expiry = try #require(files.certificateExpiry())
            #expect(exported == expiry.timeIntervalSince1970)
            #expect(expiry > Date().addingTimeInterval(30 * 86_400))
        }
    }
}
