import Crypto
import Engine
import Logging
import NIOSSL
import ServiceLifecycle

/// Where pushes go.
public enum APNsSetup: Sendable {
    /// No push transport: deliveries are recorded, nothing is pushed.
    case disabled
    /// The embedded default: an APNs simulator in this process, with a signing key generated at start. Its control
    /// API (`/_simulator/`) is off unless a bearer token for it is given.
    case embeddedSimulator(controlToken: String? = nil)
    /// Real APNs or an external simulator, with per-tenant signing identities and a default one.
    case external(
        endpoints: [APNsEnvironment: APNsEndpoint],
        defaultIdentity: APNsCredential?,
        identities: [TenantID: APNsCredential]
    )
}

/// The push side of a running broker: the gateway actor, its transport and, on the embedded default, the simulator.
struct PushStack {
    let gateway: PushGateway?
    let transport: APNsPushTransport?
    let simulator: APNsSimulator?

    static func make(
        _ setup: APNsSetup,
        configuration: PushGatewayConfiguration,
        store: any BrokerStore,
        ledger: DeliveryLedger,
        registry: TokenRegistry,
        tokenStore: (any ProviderTokenStore)?,
        logger: Logger,
        metrics: BrokerMetrics
    ) async throws -> PushStack {
        let transport: APNsPushTransport
        var simulator: APNsSimulator?
        switch setup {
        case .disabled:
            return PushStack(gateway: nil, transport: nil, simulator: nil)
        case .embeddedSimulator(let controlToken):
            let identity = APNsSigningIdentity(
                teamID: "SIMULATED1",
                keyID: "SIMKEY0001",
                key: P256.Signing.PrivateKey()
            )
            let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: ["localhost"])
            let certificate = try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
            let key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
            var serverTLS = TLSConfiguration.makeServerConfiguration(
                certificateChain: [.certificate(certificate)],
                privateKey: .privateKey(key)
            )
            serverTLS.cipherSuites = TLSFiles.aeadCipherSuites
            let running = APNsSimulator(
                configuration: APNsSimulatorConfiguration(
                    tls: serverTLS,
                    keys: [identity.keyID: identity.publicKey],
                    controlToken: controlToken
                )
            )
            let port = try await running.start()
            var trust = TLSConfiguration.makeClientConfiguration()
            trust.trustRoots = .certificates([certificate])
            let endpoint = APNsEndpoint(host: "127.0.0.1", port: port, tls: trust, serverHostname: "localhost")
            transport = APNsPushTransport(
                endpoints: [.production: endpoint, .sandbox: endpoint],
                defaultIdentity: .token(identity),
                logger: logger
            )
            simulator = running
            logger.notice("APNs simulator running in-process", metadata: ["apns.port": "\(port)"])
        case .external(let endpoints, let defaultIdentity, let identities):
            transport = APNsPushTransport(
                endpoints: endpoints,
                identities: identities,
                defaultIdentity: defaultIdentity,
                tokenStore: tokenStore,
                logger: logger
            )
        }
        let gateway = PushGateway(
            store: store,
            ledger: ledger,
            registry: registry,
            transport: ChannelRouter([.apns: transport]),
            configuration: configuration,
            logger: logger,
            metrics: metrics
        )
        return PushStack(gateway: gateway, transport: transport, simulator: simulator)
    }
}

/// Runs the push gateway's workers; on shutdown stops them, closes APNs connections and the simulator.
struct PushService: Service {
    let stack: PushStack

    func run() async throws {
        if let gateway = stack.gateway {
            // A graceful stop lets the batches already sent have their answers and write their marks (else APNs
            // has accepted pushes the ledger does not know of, and the next start sends them again); the grace
            // period's end cancels what is left.
            await withGracefulShutdownHandler {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask { await gateway.run() }
                    group.addTask { await maintain() }
                    await group.next()
                    group.cancelAll()
                }
            } onGracefulShutdown: {
                Task { await gateway.finish() }
            }
        } else {
            try? await gracefulShutdown()
        }
        await stack.transport?.shutdown()
        await stack.simulator?.stop()
    }

    /// PINGs idle APNs connections (they die silently in the field) and forgets closed ones.
    private func maintain() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(15)) } catch { return }
            for client in stack.transport?.allClients ?? [] { await client.maintain(idleAfter: .seconds(60)) }
        }
    }
}

/// Runs the scheduler until shutdown. It stops before the push service (services stop in reverse order), so
/// the last batch it hands over is still taken by the gateway or left unpushed in the ledger for the next start.
struct SchedulerService: Service {
    let scheduler: Scheduler

    func run() async throws {
        await cancelWhenGracefulShutdown { await scheduler.run() }
    }
}
