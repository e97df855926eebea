import Foundation
import Logging
import NIOSSL
import PostgresNIO
import Synchronization

/// ``BrokerStore`` on a PostgreSQL database shared by several broker nodes, through postgres-nio's connection
/// pool: parameterised statements, `UNNEST` arrays for the hot multi-row writes, the same transactions and unique
/// keys as ``SQLiteStore`` (the (tenant, user, local date) key still makes a day happen once), versioned
/// migrations applied under an advisory lock.
///
/// Times are stored as Unix seconds in `double precision` columns, as in the SQLite store, so that a value read
/// back compares equal to the one written (the scheduler's compare-and-set on fire times relies on it).
public final class PostgresStore: BrokerStore {
    let client: PostgresClient
    let logger: Logger
    let metrics: BrokerMetrics
    public let nodeID: String
    public let configuration: PostgresStoreConfiguration
    private let runner: Task<Void, Never>
    /// Rings when another node announces a change; `listener` is the task that hears the announcements.
    let bell = ChangeBell()
    let listener = Mutex<Task<Void, Never>?>(nil)
    /// Connections in use and callers waiting for one (for `/inspect` and `/metrics`).
    private let usage = Mutex(PoolUsage())
    /// The due rows this node holds claims on.
    let heldClaims = Mutex(HeldClaims())

    /// The pool's load as this process sees it.
    public struct PoolUsage: Sendable, Equatable {
        public var inUse = 0
        public var waiting = 0
        public var maximum = 0
    }

    /// Connects (the pool opens connections as they are needed); what it does about migrations the database lacks
    /// is the configuration's ``MigrationPolicy``. Several nodes may start together: the migrations run under an
    /// advisory lock, once.
    public init(
        configuration: PostgresStoreConfiguration,
        logger: Logger,
        metrics: BrokerMetrics = .disabled
    ) async throws {
        var config = PostgresClient.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.username,
            password: configuration.password,
            database: configuration.database,
            tls: try Self.tls(configuration)
        )
        config.options.maximumConnections = configuration.maximumConnections
        config.options.connectTimeout = configuration.connectTimeout
        config.options.additionalStartupParameters = [
            ("application_name", "impulse-broker"),
            ("statement_timeout", "\(configuration.statementTimeout.components.seconds * 1000)"),
            ("lock_timeout", "\(configuration.lockTimeout.components.seconds * 1000)"),
            // A transaction left open by a stuck node must not hold locks (and other nodes' claims) forever.
            ("idle_in_transaction_session_timeout", "60000"),
            // Every statement is a short one on a few thousand rows at most: compiling one to machine code, or
            // starting parallel workers for it, costs more than it saves (a compile took 100-170 ms where the
            // statement needed 10) and takes cores from the other nodes' statements.
            ("jit", "off"),
            ("max_parallel_workers_per_gather", "0"),
        ]
        var background = logger
        background.logLevel = max(logger.logLevel, .warning)
        let client = PostgresClient(configuration: config, backgroundLogger: background)
        self.client = client
        self.logger = logger
        self.metrics = metrics
        self.configuration = configuration
        self.nodeID = UUID().uuidString.lowercased()
        self.usage.withLock { $0.maximum = configuration.maximumConnections }
        // The pool runs outside any service group: the broker's services stop first and still write on their way
        // out (the last marks, the unsettled pushes); `shutdown()` ends it after them.
        self.runner = Task { await client.run() }
        do {
            try await opening()
        } catch {
            runner.cancel()
            throw error
        }
    }

    /// Connects once on its own, within `connectTimeout` three times over, so that a database that cannot be
    /// reached, or that refuses the login or the TLS handshake, fails the start with its reason (the pool would
    /// keep trying while its caller waits); then migrates through the pool (`migrate()` has its own deadline).
    private func opening() async throws {
        let limit = configuration.connectTimeout * 3
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.probe() }
            group.addTask {
                try await Task.sleep(for: limit)
                throw EngineError(.storage, "no connection to \(self.configuration.redacted) within \(limit)")
            }
            defer { group.cancelAll() }
            do {
                try await group.next()
            } catch let error as EngineError {
                throw error
            } catch {
                throw EngineError(.storage, "cannot open \(configuration.redacted): \(Self.describe(error))")
            }
        }
        do {
            try await openSchema(configuration.migrations)
        } catch let error as EngineError {
            throw error
        } catch {
            throw EngineError(.storage, "cannot migrate \(configuration.redacted): \(Self.describe(error))")
        }
    }

    /// One connection outside the pool, closed at once.
    private func probe() async throws {
        let settings = try Self.tlsSettings(configuration)
        var probe = PostgresConnection.Configuration(
            host: configuration.host,
            port: configuration.port,
            username: configuration.username,
            password: configuration.password,
            database: configuration.database,
            tls: try settings.map { mode, tls in
                let context = try NIOSSLContext(configuration: tls)
                return mode == .prefer ? .prefer(context) : .require(context)
            } ?? .disable
        )
        probe.options.connectTimeout = .seconds(configuration.connectTimeout.components.seconds)
        let connection = try await PostgresConnection.connect(configuration: probe, id: 0, logger: logger)
        try await connection.close()
    }

    deinit {
        listener.withLock { $0?.cancel() }
        runner.cancel()
    }

    /// Closes the pool's connections; the store is unusable afterwards.
    public func close() async {
        if let listening = listener.withLock({ $0 }) {
            listening.cancel()
            await listening.value
        }
        runner.cancel()
        await runner.value
    }

    public var poolUsage: PoolUsage { usage.withLock { $0 } }

    private static func tls(_ configuration: PostgresStoreConfiguration) throws -> PostgresClient.Configuration.TLS {
        guard let (mode, tls) = try tlsSettings(configuration) else { return .disable }
        return mode == .prefer ? .prefer(tls) : .require(tls)
    }

    /// nil for `disable`; otherwise whether TLS is preferred or required, and how the certificate is checked.
    private static func tlsSettings(
        _ configuration: PostgresStoreConfiguration
    ) throws -> (PostgresStoreConfiguration.TLSMode, TLSConfiguration)? {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let roots = configuration.rootCertificates { tls.trustRoots = .file(roots) }
        switch configuration.tls {
        case .disable: return nil
        case .prefer, .require: tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        return (configuration.tls, tls)
    }

    // MARK: Running statements

    /// Runs `body` on a pooled connection (reads, and single statements that commit on their own). Its result may
    /// be dropped: a body of one statement returns that statement's row count, which a caller often has no use for.
    @discardableResult
    func read<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await withConnection(operation: "read", body)
        } catch {
            throw translate(error)
        }
    }

    /// Runs `body` in one transaction: it commits when `body` returns, rolls back when it throws. A deadlock or
    /// serialization failure (two nodes writing the same rows in different orders) is retried up to twice.
    @discardableResult
    func write<T: Sendable>(
        deadline: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await withConnection(operation: "write", deadline: deadline) { connection in
                    try await connection.query("BEGIN", logger: self.logger)
                    do {
                        let value = try await body(connection)
                        try await connection.query("COMMIT", logger: self.logger)
                        return value
                    } catch {
                        _ = try? await connection.query("ROLLBACK", logger: self.logger)
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 3 && Self.isRetryable(error) {
                logger.notice("store transaction retried", metadata: ["store.error": "\(Self.describe(error))"])
                try await Task.sleep(for: .milliseconds(Int64.random(in: 5...50) * Int64(attempt)))
            } catch {
                throw translate(error)
            }
        }
    }

    /// Runs `body` on a pooled connection within `deadline` (by default the statement timeout plus the connect
    /// timeout): waiting for a connection while the database is unreachable, or for an answer that a lost network
    /// never brings, ends in an error the caller backs off from, not in a wait without end.
    func withConnection<T: Sendable>(
        operation: String,
        deadline: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let limit = deadline ?? configuration.statementTimeout + configuration.connectTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await self.leased(operation: operation, body) }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw EngineError(.storage, "the database did not answer within \(limit)")
            }
            return value
        }
    }

    private func leased<T: Sendable>(
        operation: String,
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let started = ContinuousClock.now
        usage.withLock { $0.waiting += 1 }
        var leased = false
        defer {
            usage.withLock {
                if leased { $0.inUse -= 1 } else { $0.waiting -= 1 }
            }
            metrics.storeOperation(operation, duration: started.duration(to: .now))
        }
        return try await client.withConnection { connection in
            usage.withLock {
                $0.waiting -= 1
                $0.inUse += 1
            }
            leased = true
            return try await body(connection)
        }
    }

    static func isRetryable(_ error: PSQLError) -> Bool {
        guard let state = error.serverInfo?[.sqlState] else { return false }
        return state == "40001" || state == "40P01"
    }

    /// An ``EngineError`` for any failure (cancellation passes through): unique and foreign keys become
    /// `conflict` and `notFound`; anything else is logged (SQLSTATE and message, no SQL) and becomes `storage`.
    func translate(_ error: any Error) -> any Error {
        if error is EngineError || error is CancellationError { return error }
        if let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] {
            switch state {
            case "23505": return EngineError(.conflict, "the record already exists")
            case "23503": return EngineError(.notFound, "a referenced record does not exist")
            default: break
            }
        }
        logger.error("store failure", metadata: ["store.error": "\(Self.describe(error))"])
        return EngineError(.storage, "the store failed")
    }

    /// The SQLSTATE and the server's message only: statements and arguments may hold personal data.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let state = error.serverInfo?[.sqlState] {
                return "PostgreSQL \(state): \(error.serverInfo?[.message] ?? "")"
            }
            // The client's own failures (connection, TLS, authentication) and what caused them: no statement.
            return "PostgreSQL client: \(error.code)" + (error.underlying.map { " (\($0))" } ?? "")
        }
        return String(describing: type(of: error))
    }
}

extension PostgresConnection {
    /// Every row of a statement's result, for reading by column position.
    func rows(_ query: PostgresQuery, _ logger: Logger) async throws -> [PostgresRandomAccessRow] {
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await self.query(query, logger: logger) { rows.append(row.makeRandomAccess()) }
        return rows
    }

    /// Runs a statement; returns how many rows it returned (with `RETURNING 1`: how many it changed).
    @discardableResult
    func run(_ query: PostgresQuery, _ logger: Logger) async throws -> Int {
        var count = 0
        for try await _ in try await self.query(query, logger: logger) { count += 1 }
        return count
    }
}

extension PostgresRandomAccessRow {
    /// The value of column `index`.
    func at<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        try self[index].decode(T.self)
    }
}
