import ArgumentParser
import Engine
import Foundation
import Gateway
import Logging
import ServiceLifecycle

@main
struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract:
            "Impulse Broker: daily wellbeing impulses pushed to iPhones, and the REST API the app reads them from.",
        subcommands: [
            Demo.self, Serve.self, SimulatorCommand.self, TenantCommand.self, UserCommand.self, OperatorCommand.self,
            AuditCommand.self, CatalogCommand.self, Deliver.self, StoreCommand.self, MigrateCommand.self,
        ]
    )
}

/// Logging is bootstrapped here and nowhere else.
func bootstrapLogging(_ level: Logger.Level) -> Logger {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return Logger(label: "broker")
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the broker: the HTTPS listener and its actors.")

    @OptionGroup var common: CommonOptions

    @Option(help: "HTTPS listen address host:port (env BROKER_LISTEN; default 0.0.0.0:8443).")
    var listen: String?

    @Option(help: "Optional plain HTTP/1.1 listener for use behind a TLS proxy (env BROKER_PLAIN_LISTEN).")
    var plainListen: String?

    @Option(help: "Tenant that serves the original unprefixed paths (env BROKER_DEFAULT_TENANT).")
    var defaultTenant: String?

    func run() async throws {
        var environment = ProcessInfo.processInfo.environment
        if let listen { environment["BROKER_LISTEN"] = listen }
        if let plainListen { environment["BROKER_PLAIN_LISTEN"] = plainListen }
        if let defaultTenant { environment["BROKER_DEFAULT_TENANT"] = defaultTenant }
        let settings = try BrokerSettings(options: common, environment: environment)
        let logger = bootstrapLogging(settings.logLevel)
        let metrics = MetricsSetup()
        let store = try await settings.openStore(logger: logger, metrics: metrics.metrics)
        let app = try await buildApplication(
            configuration: settings.serverConfiguration(logger: logger),
            store: store,
            logger: logger,
            metrics: metrics,
            gracefulShutdownSignals: [.sigterm, .sigint]
        ) { listener, port in
            logger.notice("listening", metadata: ["listener": "\(listener)", "port": "\(port)"])
        }
        do {
            try await app.run()
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}
