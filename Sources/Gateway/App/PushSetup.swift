import Crypto
import Engine
import Foundation
import Logging
import NIOSSL
import ServiceLifecycle
import _CryptoExtras

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

/// Where Android pushes go (FCM HTTP v1).
public enum FCMSetup: Sendable {
    /// No FCM transport: pushes to Android devices are refused (`ChannelNotConfigured`) and the devices kept.
    case disabled
    /// The in-process simulator's FCM side, with a service account generated at start as every tenant's default.
    case embeddedSimulator
    /// Google's FCM (or an external simulator): the endpoint, the broker's default account and per-tenant ones,
    /// and where tokens are exchanged for every account, uploaded ones included (nil: each key's `token_uri`).
    case external(
        endpoint: PushEndpoint,
        defaultAccount: FCMServiceAccount?,
        accounts: [TenantID: FCMServiceAccount],
        tokenURI: URL? = nil
    )
}

/// The push side of a running broker: the gateway actor, its transports and, on the embedded default, the
/// simulator (one, speaking APNs and FCM).
struct PushStack {
    let gateway: PushGateway?
    let transport: APNsPushTransport?
    let fcm: FCMPushTransport?
    let simulator: APNsSimulator?

    static func make(
        _ setup: APNsSetup,
        fcm fcmSetup: FCMSetup = .disabled,
        configuration: PushGatewayConfiguration,
        store: any BrokerStore,
        ledger: DeliveryLedger,
        registry: TokenRegistry,
        tokenStore: (any ProviderTokenStore)?,
        logger: Logger,
        metrics: BrokerMetrics
    ) async throws -> PushStack {
        var simulated: (simulator: APNsSimulator, endpoint: PushEndpoint, apnsKey: APNsSigningIdentity)?
        let apnsEmbedded: Bool = if case .embeddedSimulator = setup { true } else { false }
        let fcmEmbedded: Bool = if case .embeddedSimulator = fcmSetup { true } else { false }
        if apnsEmbedded || fcmEmbedded {
            let controlToken: String? = if case .embeddedSimulator(let token) = setup { token } else { nil }
            simulated = try await startSimulator(controlToken: controlToken)
            logger.notice(
                "push simulator running in-process",
                metadata: [
                    "simulator.port": "\(simulated!.endpoint.port)", "simulator.apns": "\(apnsEmbedded)",
                    "simulator.fcm": "\(fcmEmbedded)",
                ]
            )
        }
        var apns: APNsPushTransport?
        switch setup {
        case .disabled: break
        case .embeddedSimulator:
            apns = APNsPushTransport(
                endpoints: [.production: simulated!.endpoint, .sandbox: simulated!.endpoint],
                defaultIdentity: .token(simulated!.apnsKey),
                logger: logger
            )
        case .external(let endpoints, let defaultIdentity, let identities):
            apns = APNsPushTransport(
                endpoints: endpoints,
                identities: identities,
                defaultIdentity: defaultIdentity,
                tokenStore: tokenStore,
                logger: logger
            )
        }
        var fcm: FCMPushTransport?
        switch fcmSetup {
        case .disabled: break
        case .embeddedSimulator:
            let endpoint = simulated!.endpoint
            let account = FCMServiceAccount(
                projectID: "impulse-simulated",
                clientEmail: "broker@impulse-simulated.iam.gserviceaccount.com",
                privateKeyID: "simulated",
                tokenURI: URL(string: "https://\(endpoint.host):\(endpoint.port)/token")!,
                key: try _RSA.Signing.PrivateKey(keySize: .bits2048)
            )
            simulated!.simulator.setFCMAccount(
                account.clientEmail,
                FCMSimulatedAccount(projectID: account.projectID, publicKey: account.publicKey)
            )
            fcm = FCMPushTransport(
                endpoint: endpoint,
                defaultAccount: account,
                tokenURI: account.tokenURI,
                logger: logger
            )
        case .external(let endpoint, let defaultAccount, let accounts, let tokenURI):
            fcm = FCMPushTransport(
                endpoint: endpoint,
                accounts: accounts,
                defaultAccount: defaultAccount,
                tokenURI: tokenURI,
                logger: logger
            )
        }
        var transports: [PushChannel: any PushTransport] = [:]
        if let apns { transports[.apns] = apns }
        if let fcm { transports[.fcm] = fcm }
        guard !transports.isEmpty else {
            return PushStack(gateway: nil, transport: nil, fcm: nil, simulator: simulated?.simulator)
        }
        let gateway = PushGateway(
            store: store,
            ledger: ledger,
            registry: registry,
            transport: ChannelRouter(transports),
            configuration: configuration,
            logger: logger,
            metrics: metrics
        )
        return PushStack(gateway: gateway, transport: apns, fcm: fcm, simulator: simulated?.simulator)
    }

    /// The in-process simulator over TLS on loopback, with a signing key generated for APNs; its control API
    /// (`/_simulator/`) is off unless a bearer token for it is given.
    private static func startSimulator(
        controlToken: String?
    ) async throws -> (simulator: APNsSimulator, endpoint: PushEndpoint, apnsKey: APNsSigningIdentity) {
        let identity = APNsSigningIdentity(teamID: "SIMULATED1", keyID: "SIMKEY0001", key: P256.Signing.PrivateKey())
        let (certificatePEM, keyPEM) = try SelfSignedCertificate.make(hostnames: ["localhost"])
        let certificate = try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
        let key = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        var serverTLS = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)],
            privateKey: .privateKey(key)
        )
        serverTLS.cipherSuites = TLSFiles.aeadCipherSuites
        let simulator = APNsSimulator(
            configuration: APNsSimulatorConfiguration(
                tls: serverTLS,
                keys: [identity.keyID: identity.publicKey],
                controlToken: controlToken
            )
        )
        let port = try await simulator.start()
        var trust = TLSConfiguration.makeClientConfiguration()
        trust.trustRoots = .certificates([certificate])
        return (
            simulator, PushEndpoint(host: "127.0.0.1", port: port, tls: trust, serverHostname: "localhost"), identity
        )
    }
}

/// Runs the push gateway's workers; on shutdown stops them, closes APNs' and FCM's connections and the simulator.
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
        await stack.fcm?.shutdown()
        await stack.simulator?.stop()
    }

    /// PINGs idle APNs and FCM connections (they die silently in the field) and forgets closed ones.
    private func maintain() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: .seconds(15)) } catch { return }
            let clients = (stack.transport?.allClients ?? []) + (stack.fcm?.allClients ?? [])
            for client in clients { await client.maintain(idleAfter: .seconds(60)) }
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

/// Runs the learned-time safety valve (issue 45) on the nodes that run the scheduler, until shutdown.
struct LearnedTimingGuardService: Service {
    let guardian: LearnedTimingGuardian

    func run() async throws {
        await cancelWhenGracefulShutdown { await guardian.run() }
    }
}
