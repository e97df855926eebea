import Engine
import Foundation

/// Scenario `fcm-peer`: the same Android messages to the same simulator, sent by the Firebase Admin Python SDK
/// (`firebase-admin` from PyPI, the established server client, its `send_each_async` over HTTP/2) and by the
/// broker's push gateway alone over FCM (deliveries already in the ledger, no scheduler).
///
/// As in the APNs peer scenario, each round runs the SDK and then the gateway, and the result is the median round's
/// ratio of their rates; CPU per message is measured for both (the SDK's process, the gateway's process with its
/// ledger writes). Targets (issue 35): the gateway at least 10 times the SDK's rate at no more than its CPU per
/// message.
enum FCMPeer {
    /// The SDK's version this comparison was made with.
    static let firebaseAdmin = "7.7.0"

    static func run(
        pushes: Int,
        rounds: Int,
        python: String,
        gateway configuration: PushGatewayConfiguration,
        simulator: SimulatorProcess,
        work: String
    ) async throws -> [String: Any] {
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try await simulator.prepare(deadPercent: 0)
        let interpreter = try sdk(python)
        var sdkRuns: [(rate: Double, cpu: Double)] = []
        let gateway = try await Peer.gatewayAlone(
            pushes: pushes,
            rounds: rounds,
            channel: .fcm,
            configuration: configuration,
            simulator: simulator,
            work: work
        ) { round in
            FileHandle.standardError.write(
                Data("  fcm-peer: firebase-admin sends \(pushes) messages (round \(round + 1) of \(rounds))\n".utf8)
            )
            sdkRuns.append(try send(interpreter, pushes: pushes, simulator: simulator, work: work))
        }
        let gatewayRates = gateway["rounds"] as? [Double] ?? []
        let gatewayCPU = gateway["brokerCPUMicrosecondsPerPush"] as? [Double] ?? []
        let ratios = zip(gatewayRates, sdkRuns).map { $0 / max(0.001, $1.rate) }
        let cpuRatios = zip(gatewayCPU, sdkRuns).map { $0 / max(0.001, $1.cpu) }
        return [
            "firebaseAdmin": [
                "version": firebaseAdmin, "messages": pushes, "rounds": sdkRuns.map(\.rate),
                "messagesPerSecond": Peer.median(sdkRuns.map(\.rate)),
                "cpuMicrosecondsPerMessage": sdkRuns.map(\.cpu),
            ],
            "gateway": gateway,
            // Gateway over the SDK in each round (the two ran back to back), and their medians: the rate (target
            // >= 10) and the CPU per message (target <= 1).
            "ratios": ratios, "ratio": Peer.median(ratios),
            "cpuRatios": cpuRatios, "cpuRatio": Peer.median(cpuRatios),
        ]
    }

    /// A Python with the SDK: `python` when it has it, else a virtual environment under `.build` made for it.
    static func sdk(_ python: String) throws -> String {
        func hasSDK(_ interpreter: String) -> Bool {
            FileManager.default.isExecutableFile(atPath: interpreter)
                && (try? runProgram(
                    interpreter,
                    ["-c", "import firebase_admin, h2; print('sdk ' + firebase_admin.__version__)"]
                ))?
                .contains("sdk \(firebaseAdmin)") == true
        }
        if hasSDK(python) { return python }
        let venv = FileManager.default.currentDirectoryPath + "/.build/firebase-venv"
        let interpreter = venv + "/bin/python3"
        if !hasSDK(interpreter) {
            FileHandle.standardError.write(
                Data("  fcm-peer: installing firebase-admin \(firebaseAdmin) into \(venv)\n".utf8)
            )
            _ = try runProgram("/usr/bin/python3", ["-m", "venv", venv])
            let output = try runProgram(
                venv + "/bin/pip",
                ["install", "--quiet", "--disable-pip-version-check", "firebase-admin==\(firebaseAdmin)", "h2"]
            )
            guard hasSDK(interpreter) else { throw BenchError("firebase-admin did not install: \(output.suffix(800))") }
        }
        return interpreter
    }

    /// The SDK sends `pushes` messages at once, in its batches of 500; its rate (messages accepted per second) and
    /// CPU per message in microseconds. Fails unless every message was accepted.
    static func send(
        _ python: String,
        pushes: Int,
        simulator: SimulatorProcess,
        work: String
    ) throws -> (rate: Double, cpu: Double) {
        try script.write(toFile: work + "/firebase_admin_bench.py", atomically: true, encoding: .utf8)
        let output = try runProgram(
            python,
            [
                work + "/firebase_admin_bench.py", "\(simulator.port)", "\(pushes)", simulator.serviceAccountPath,
                simulator.certificatePath,
            ]
        )
        guard let match = output.firstMatch(of: #/elapsed ([0-9.]+) cpu ([0-9.]+) ok (\d+) failed (\d+)/#),
            let elapsed = Double(match.1), let cpu = Double(match.2), let ok = Int(match.3)
        else { throw BenchError("firebase-admin: \(output.suffix(800))") }
        guard ok == pushes else {
            throw BenchError("firebase-admin: \(pushes - ok) of \(pushes) messages failed: \(output.suffix(800))")
        }
        return (Double(ok) / elapsed, cpu / Double(pushes) * 1e6)
    }

    static let script = #"""
        import asyncio, json, os, sys, time, warnings
        import httpx
        import firebase_admin
        from firebase_admin import credentials, messaging
        from google.auth import jwt
        from google.oauth2 import credentials as oauth2
        from google.oauth2 import service_account

        warnings.simplefilter("ignore", DeprecationWarning)  # Message.token: the broker's devices are tokens too
        port, count, key_path, cert = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
        base = f"https://localhost:{port}"
        os.environ["SSL_CERT_FILE"] = cert  # httpx trusts the simulator's certificate through it
        with open(key_path) as handle:
            info = json.load(handle)

        # The token exchange: google-auth posts the account's assertion over HTTP/1.1 (requests), and the simulator
        # speaks HTTP/2 only, so the assertion google-auth's signer makes goes over httpx's HTTP/2 here, once (a
        # token lasts an hour); the SDK then uses that token for every message.
        signer = service_account.Credentials.from_service_account_info(info).signer
        now = int(time.time())
        assertion = jwt.encode(signer, {"iss": info["client_email"], "aud": base + "/token", "iat": now,
            "exp": now + 3600, "scope": "https://www.googleapis.com/auth/firebase.messaging"}).decode()
        with httpx.Client(http2=True, verify=cert) as client:
            answer = client.post(base + "/token", data={
                "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": assertion})
        if answer.status_code != 200:
            sys.exit(f"token endpoint: {answer.status_code} {answer.text}")
        token = answer.json()["access_token"]

        class Fixed(credentials.Base):
            def get_credential(self):
                return oauth2.Credentials(token=token)

        firebase_admin.initialize_app(Fixed(), {"projectId": info["project_id"]})
        # Point the SDK at the simulator instead of Google.
        messaging._MessagingService.FCM_URL = base + "/v1/projects/{0}/messages:send"

        def device(user):  # the broker-bench seed's Android tokens
            return "bench-%d:APA91b%016x" % (user, (user * 0x9E3779B97F4A7C15) % (1 << 64))

        # The broker's message: a notification title, the collapse key, a day's TTL, high priority, three data keys.
        messages = [messaging.Message(
            token=device(user),
            notification=messaging.Notification(title="Impulse 1"),
            android=messaging.AndroidConfig(collapse_key="impulse-%d" % user, ttl=86400, priority="high"),
            data={"delivery_id": str(user), "impulse_id": "impulse-1", "unread_count": "1"})
            for user in range(1, count + 1)]

        async def main():
            started, cpu = time.monotonic(), time.process_time()
            # send_each_async takes at most 500 messages, sent concurrently. One batch after another is the SDK's
            # faster way on this machine (all of them at once: 407 against 627 messages/s for 5,000; its own CPU
            # is what limits it).
            batches = [await messaging.send_each_async(messages[start:start + 500], dry_run=False)
                for start in range(0, count, 500)]
            elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
            ok = sum(batch.success_count for batch in batches)
            errors = [str(r.exception) for batch in batches for r in batch.responses if r.exception][:3]
            print(f"elapsed {elapsed} cpu {cpu} ok {ok} failed {count - ok} {errors}")
        asyncio.run(main())
        """#
}
