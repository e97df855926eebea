import Engine
import Foundation
import Gateway
import Logging

/// Scenario 4: the same pushes to the same simulator, sent by aioapns (the established Python client, Debian's
/// python3-aioapns) and by the broker's push gateway alone (deliveries already in the ledger, no scheduler).
///
/// Each round runs aioapns and then the gateway, and gives the ratio of their rates: this machine's speed drifts
/// within a run (by half, at times), so a ratio of two measurements taken minutes apart said more about the
/// drift than about the clients. The result is the median round's ratio.
enum Peer {
    static func run(
        pushes: Int,
        rounds: Int,
        withClient: Bool,
        gateway configuration: PushGatewayConfiguration,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try await simulator.prepare(deadPercent: 0)
        var peerRates: [Double] = []
        let gateway = try await gatewayAlone(
            pushes: pushes,
            rounds: rounds,
            configuration: configuration,
            simulator: simulator,
            work: work
        ) { round in
            guard withClient else { return }
            FileHandle.standardError.write(
                Data("  peer: aioapns sends \(pushes) pushes (round \(round + 1) of \(rounds))\n".utf8)
            )
            peerRates.append(try aioapns(pushes: pushes, simulator: simulator, work: work))
        }
        guard withClient else { return ["gateway": gateway] }
        let gatewayRates = gateway["rounds"] as? [Double] ?? []
        let ratios = zip(gatewayRates, peerRates).map { $0 / max(0.001, $1) }
        return [
            "aioapns": ["pushes": pushes, "rounds": peerRates, "pushesPerSecond": median(peerRates)],
            "gateway": gateway,
            // Gateway over aioapns in each round (the two ran back to back), and their median.
            "ratios": ratios,
            "ratio": median(ratios),
        ]
    }

    /// The middle value, or the mean of the two middle ones for an even count (0 for none).
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    static let script = #"""
        import asyncio, ssl, sys, time
        from aioapns import APNs, NotificationRequest
        import aioapns.connection as connection
        port, count, key_path, cert = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
        # Point aioapns at the simulator instead of Apple: host, port, and the simulator's certificate.
        connection.APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
        connection.APNsTLSClientProtocol.APNS_PORT = port
        context = ssl.create_default_context(cafile=cert)
        context.check_hostname = False
        async def main():
            client = APNs(key=key_path, key_id="BENCHKEY01", team_id="BENCHTEAM1",
                          topic="com.bench.impulse", use_sandbox=False, ssl_context=context)
            token = "%064x" % ((1 * 0x9E3779B97F4A7C15) % (1 << 64))
            message = {"aps": {"alert": {"title": "Impulse 1"}, "badge": 1}, "impulse": "impulse-1"}
            started = time.monotonic()
            results = await asyncio.gather(*[
                client.send_notification(NotificationRequest(device_token=token, message=message))
                for _ in range(count)])
            elapsed = time.monotonic() - started
            ok = sum(1 for r in results if r.is_successful)
            print(f"elapsed {elapsed} ok {ok} failed {count - ok}")
        asyncio.run(main())
        """#

    /// aioapns sends `pushes` pushes at once; its rate, pushes accepted per second. Fails unless every push was
    /// accepted.
    static func aioapns(pushes: Int, simulator: SimulatorProcess, work: String) throws -> Double {
        try script.write(toFile: work + "/aioapns_bench.py", atomically: true, encoding: .utf8)
        let output = try runProgram(
            "/usr/bin/python3",
            [
                work + "/aioapns_bench.py", "\(simulator.port)", "\(pushes)", simulator.keyPath,
                simulator.certificatePath,
            ]
        )
        guard let match = output.firstMatch(of: #/elapsed ([0-9.]+) ok (\d+) failed (\d+)/#),
            let elapsed = Double(match.1), let ok = Int(match.2)
        else { throw BenchError("aioapns: \(output.suffix(800))") }
        guard ok == pushes else { throw BenchError("aioapns: \(pushes - ok) of \(pushes) pushes failed") }
        return Double(ok) / elapsed
    }

    /// The gateway pushes `pushes` deliveries `rounds` times (one gateway, one connection pool, one store seeded
    /// with every round's deliveries), after `beforeRound` each time; the median round is the result, every round
    /// is reported. `channel`: every user's device is an iPhone (APNs) or an Android phone (FCM).
    static func gatewayAlone(
        pushes: Int,
        rounds: Int,
        channel: PushChannel = .apns,
        configuration: PushGatewayConfiguration,
        simulator: SimulatorProcess,
        work: String,
        beforeRound: (Int) async throws -> Void
    ) async throws -> [String: Any] {
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let store = try await SQLiteStore(configuration: .init(path: work + "/broker.sqlite"), logger: logger)
        try await Burst.seed(store, users: pushes, androidPercent: channel == .fcm ? 100 : 0)
        let tenant = try TenantID("bench")
        let impulse = try ImpulseID("impulse-1")
        var deliveries: [Delivery] = []
        var next: Int64 = 1
        // Each round's deliveries go to the same users (manual deliveries: any number per user and day).
        while next <= Int64(pushes * rounds) {
            let upper = min(Int64(pushes * rounds), next + 19_999)
            deliveries += try await store.recordDeliveries(
                (next...upper).map {
                    NewDelivery(
                        tenant: tenant,
                        user: UserID(($0 - 1) % Int64(pushes) + 1),
                        impulse: impulse,
                        kind: .manual,
                        assignedAt: Date(),
                        awaitsPush: true
                    )
                }
            )
            next = upper + 1
        }
        let endpoint = APNsEndpoint(
            host: "127.0.0.1",
            port: simulator.port,
            tls: simulator.tls(),
            serverHostname: "localhost"
        )
        let transport: any PushTransport
        switch channel {
        case .apns:
            transport = APNsPushTransport(
                endpoints: [.production: endpoint],
                defaultIdentity: .token(simulator.identity),
                logger: logger
            )
        case .fcm:
            var account = simulator.account
            account.tokenURI = URL(string: "https://127.0.0.1:\(simulator.port)/token")!
            transport = FCMPushTransport(
                endpoint: endpoint,
                defaultAccount: account,
                tokenURI: account.tokenURI,
                logger: logger
            )
        }
        let ledger = DeliveryLedger(store: store, catalog: CatalogCache(store: store))
        let gateway = PushGateway(
            store: store,
            ledger: ledger,
            registry: TokenRegistry(store: store, logger: logger),
            transport: transport,
            configuration: configuration,
            logger: logger
        )
        let running = Task { await gateway.run() }
        var rates: [Double] = []
        var cpu: [(broker: Double, simulator: Double)] = []
        for round in 0..<rounds {
            try await beforeRound(round)
            FileHandle.standardError.write(
                Data("  peer: the gateway pushes \(pushes) deliveries (round \(round + 1) of \(rounds))\n".utf8)
            )
            let started = ContinuousClock.now
            let cpuStarted = (broker: Machine.cpuSeconds() ?? 0, simulator: simulator.cpuSeconds())
            // Handed over a thousand at a time, as the scheduler hands over its batches (one hop each).
            let roundDeliveries = deliveries[(round * pushes)..<((round + 1) * pushes)]
            for start in stride(from: roundDeliveries.startIndex, to: roundDeliveries.endIndex, by: 1000) {
                let chunk = roundDeliveries[start..<min(start + 1000, roundDeliveries.endIndex)]
                _ = await gateway.enqueue(contentsOf: chunk.map { ($0, nil) })
            }
            while await gateway.statistics.accepted < (round + 1) * pushes {
                try await Task.sleep(for: .milliseconds(5))
            }
            rates.append(Double(pushes) / started.duration(to: .now).seconds)
            cpu.append(
                (
                    ((Machine.cpuSeconds() ?? 0) - cpuStarted.broker) / Double(pushes) * 1e6,
                    (simulator.cpuSeconds() - cpuStarted.simulator) / Double(pushes) * 1e6
                )
            )
        }
        running.cancel()
        await (transport as? APNsPushTransport)?.shutdown()
        await (transport as? FCMPushTransport)?.shutdown()
        let median = median(rates)
        return [
            "pushes": pushes, "rounds": rates, "pushesPerSecond": median, "seconds": Double(pushes) / median,
            // Per push, each round: the gateway (this process) and the simulator.
            "brokerCPUMicrosecondsPerPush": cpu.map(\.broker),
            "simulatorCPUMicrosecondsPerPush": cpu.map(\.simulator),
        ]
    }
}

enum Summary {
    static func text(_ results: [String: Any]) -> String {
        func number(_ value: Any?, _ digits: Int = 0) -> String {
            guard let value = value as? Double ?? (value as? Int).map(Double.init) else { return "-" }
            return String(format: "%.\(digits)f", value)
        }
        var lines = ["Summary"]
        let ceiling = results["simulatorCeiling"] as? [String: Any]
        lines.append("  simulator ceiling (h2load POST): \(number(ceiling?["requestsPerSecond"])) req/s")
        for name in ["burst", "androidBurst", "rejections"] {
            guard let run = results[name] as? [String: Any] else { continue }
            lines.append(
                "  \(name): \(number(run["users"])) users, last answer after \(number(run["secondsToLastAnswer"], 1)) s, "
                    + "\(number(run["acceptedPerSecond"])) accepted/s, ledger durable after "
                    + "\(number(run["secondsToLedgerDurable"], 1)) s, peak RSS "
                    + "\(number((run["peakRSSBytes"] as? Int).map { Double($0) / 1_048_576 })) MiB, "
                    + "tokens removed \(number(run["tokensRemoved"])), quarantined \(number(run["tokensQuarantined"])), "
                    + "purged \(number(run["goneDevicesPurged"])) afterwards in \(number(run["purgeSeconds"], 2)) s, "
                    + "CPU per user: broker \(number(run["brokerCPUMicrosecondsPerUser"], 1)) us, simulator "
                    + "\(number(run["simulatorCPUMicrosecondsPerUser"], 1)) us"
            )
        }
        for run in results["learnedTiming"] as? [[String: Any]] ?? [] {
            let early = run["days1to7"] as? [String: Any] ?? [:]
            let late = run["days22on"] as? [String: Any] ?? [:]
            let moved = (run["afterMove"] as? [String: Any]).map {
                ", 14 days after a move \(number($0["learnedAgainstOracle"], 3)) of the oracle (>= 0.90)"
            }
            let groups = (run["groups"] as? [String: [String: Any]] ?? [:]).sorted { $0.key < $1.key }.map {
                "\($0.key) \(number($0.value["learnedAgainstOracle"], 3))"
            }
            lines.append(
                "  learned timing, \(run["family"] ?? "?") seed \(number(run["seed"])), \(number(run["readers"])) "
                    + "readers (\(run["path"] ?? "?")): days 22-60 \(number(late["learnedAgainstOracle"], 3)) of the oracle "
                    + "(>= 0.85), \(number(late["learnedAgainstFixed"], 3)) times fixed (>= 1.00; oracle "
                    + "\(number(late["oracleAgainstFixed"], 3)) times fixed); days 1-7 \(number(early["learnedAgainstFixed"], 3)) "
                    + "times fixed (>= 0.98)\(moved ?? ""); never-readers near their time "
                    + "\(number(run["neverReadersNearStated"], 3)) (>= 0.95); of the oracle by group: "
                    + groups.joined(separator: ", ") + "; pushes in quiet hours \(number(run["pushesInQuietHours"])), "
                    + "outside the window \(number(run["pushesOutsideWindow"])), on excluded days "
                    + "\(number(run["pushesOnExcludedDays"])), missed days \(number(run["missedDays"])); "
                    + "\(number(run["seconds"], 1)) s"
            )
        }
        if let against = results["androidBurstAgainstBurst"] {
            lines.append("  half on Android against all on APNs: \(number(against, 2)) times the time (target <= 1.25)")
        }
        if let against = results["rejectionsAgainstClean"] as? [String: Any] {
            lines.append(
                "  rejections against clean: valid pushes/s \(number(against["validPushesPerSecond"], 2)), users/s "
                    + "\(number(against["usersPerSecond"], 2))"
            )
        }
        if let rest = results["rest"] as? [String: Any] {
            let broker = rest["broker"] as? [String: Any]
            let reference = rest["nghttpd"] as? [String: Any]
            lines.append(
                "  GET /CurrentImpulse: broker \(number(broker?["requestsPerSecond"])) req/s "
                    + "(p50 \(number(broker?["p50Milliseconds"], 2)) ms, p99 \(number(broker?["p99Milliseconds"], 2)) ms), "
                    + "nghttpd \(number(reference?["requestsPerSecond"])) req/s "
                    + "(p50 \(number(reference?["p50Milliseconds"], 2)) ms, p99 \(number(reference?["p99Milliseconds"], 2)) ms), "
                    + "ratio \(number(rest["ratio"], 3))"
            )
            let gzip = rest["brokerGzip"] as? [String: Any]
            lines.append(
                "  GET /CurrentImpulse gzipped: \(number(gzip?["requestsPerSecond"])) req/s (p50 "
                    + "\(number(gzip?["p50Milliseconds"], 2)) ms, p99 \(number(gzip?["p99Milliseconds"], 2)) ms), body "
                    + "\(rest["gzipBodyBytes"] ?? 0) of \(rest["bodyBytes"] ?? 0) bytes"
            )
        }
        if let peer = results["peer"] as? [String: Any] {
            let gateway = peer["gateway"] as? [String: Any]
            let aioapns = peer["aioapns"] as? [String: Any]
            lines.append(
                "  push gateway alone \(number(gateway?["pushesPerSecond"])) pushes/s (median of "
                    + "\(((gateway?["rounds"] as? [Double]) ?? []).map { number($0) }.joined(separator: ", "))), aioapns "
                    + "\(number(aioapns?["pushesPerSecond"])) pushes/s (median of "
                    + "\(((aioapns?["rounds"] as? [Double]) ?? []).map { number($0) }.joined(separator: ", "))), ratio "
                    + "\(number(peer["ratio"], 1)) (median of rounds: "
                    + "\(((peer["ratios"] as? [Double]) ?? []).map { number($0, 1) }.joined(separator: ", "))); broker CPU "
                    + "per push \(((gateway?["brokerCPUMicrosecondsPerPush"] as? [Double]) ?? []).map { number($0, 1) }.joined(separator: ", ")) us"
            )
        }
        if let peer = results["fcmPeer"] as? [String: Any] {
            let gateway = peer["gateway"] as? [String: Any]
            let sdk = peer["firebaseAdmin"] as? [String: Any]
            func list(_ values: Any?, _ digits: Int = 0) -> String {
                ((values as? [Double]) ?? []).map { number($0, digits) }.joined(separator: ", ")
            }
            lines.append(
                "  FCM gateway alone \(number(gateway?["pushesPerSecond"])) messages/s (median of "
                    + "\(list(gateway?["rounds"]))), firebase-admin \(number(sdk?["messagesPerSecond"])) messages/s "
                    + "(median of \(list(sdk?["rounds"]))), ratio \(number(peer["ratio"], 1)) (target >= 10); CPU per "
                    + "message: gateway \(list(gateway?["brokerCPUMicrosecondsPerPush"], 1)) us, firebase-admin "
                    + "\(list(sdk?["cpuMicrosecondsPerMessage"], 1)) us, ratio \(number(peer["cpuRatio"], 2)) (target <= 1)"
            )
        }
        if let outage = results["outage"] as? [String: Any] {
            for run in outage["runs"] as? [[String: Any]] ?? [] {
                lines.append(
                    "  APNs \(run["kind"] ?? "") for \(number(run["outageSeconds"])) s: \(run["accepted"] ?? 0) of "
                        + "\(run["pushes"] ?? 0) pushes accepted \(number(run["secondsAfterEnd"], 1)) s after it ended "
                        + "(target 15 s)"
                )
            }
        }
        if let overload = results["overload"] as? [String: Any] {
            lines.append(
                "  overload: capacity \(number(overload["capacityRequestsPerSecond"])) req/s (p99 "
                    + "\(number(overload["capacityP99Milliseconds"], 1)) ms); offered \(number(overload["offeredRequestsPerSecond"])) "
                    + "req/s: admitted \(number(overload["admittedPerSecond"])) req/s, p50 "
                    + "\(number(overload["admittedP50Milliseconds"], 1)) ms, p99 \(number(overload["admittedP99Milliseconds"], 1)) ms; "
                    + "refused \(number((overload["refusedShare"] as? Double ?? 0) * 100, 1))%; peak RSS "
                    + "\(number(Double(overload["peakResidentBytes"] as? Int ?? 0) / 1_048_576)) MiB"
            )
        }
        if let restarts = results["restarts"] as? [String: Any] {
            lines.append(
                "  restarts: \(restarts["users"] ?? 0) users, SIGKILL every \(number(restarts["killEverySeconds"], 1)) s, "
                    + "\(restarts["runs"] ?? 0) runs: \(restarts["accepted"] ?? 0) pushes accepted, "
                    + "\(restarts["repeats"] ?? 0) repeats (\(number(restarts["repeatsPerThousand"], 1)) per thousand)"
            )
        }
        for run in results["postgres"] as? [[String: Any]] ?? [] {
            let peaks = (run["peakRSSBytesPerNode"] as? [Int] ?? []).map { number(Double($0) / 1_048_576) }
            lines.append(
                "  postgres, \(run["nodes"] ?? 0) node(s): \(number(run["users"])) users, last push after "
                    + "\(number(run["secondsToLastPush"], 1)) s, ledger durable after "
                    + "\(number(run["secondsToLedgerDurable"], 1)) s, peak RSS per node \(peaks.joined(separator: ", ")) MiB, "
                    + "deliveries per node \(run["deliveriesPerNode"] ?? []), CPU per user: broker "
                    + "\(number(run["brokerCPUMicrosecondsPerUser"], 1)) us, database "
                    + "\(number(run["databaseCPUMicrosecondsPerUser"], 1)) us"
            )
        }
        if let against = results["postgresAgainstSQLite"] as? [String: Any] {
            lines.append(
                "  postgres against sqlite (time to the last push; target <= 2): "
                    + "\(number(against["oneNode"], 2)) with one node; two nodes against one (target <= 1): "
                    + "\(number(against["twoNodesAgainstOne"], 2))"
            )
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
