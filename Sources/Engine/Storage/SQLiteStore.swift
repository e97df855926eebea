import Foundation
import GRDB
import Logging

/// Configuration of the embedded store.
public struct SQLiteStoreConfiguration: Sendable {
    /// Path of the database file; its directory must exist.
    public var path: String
    /// How long a writer waits for another process's write lock (the admin commands) before failing.
    public var busyTimeout: Duration
    /// Concurrent read connections (WAL lets reads run beside the one writer).
    public var maximumReaderCount: Int
    /// Whether opening applies the migrations the file lacks.
    public var migrations: MigrationPolicy

    public init(
        path: String,
        busyTimeout: Duration = .seconds(5),
        maximumReaderCount: Int = 4,
        migrations: MigrationPolicy = .apply
    ) {
        self.path = path
        self.busyTimeout = busyTimeout
        self.maximumReaderCount = maximumReaderCount
        self.migrations = migrations
    }
}

/// ``BrokerStore`` on one SQLite file through GRDB, in WAL mode with versioned migrations.
///
/// Reads run on a pool of readers beside the single writer; callers batch writes (the ledger's group commit)
/// so that concurrent requests share transactions instead of queueing one by one.
public final class SQLiteStore: BrokerStore {
    let pool: DatabasePool
    let logger: Logger
    let metrics: BrokerMetrics
    public let nodeID: String
    /// Held shared while the store is open: a restore refuses meanwhile (``StoreFileLock``).
    private let fileLock: StoreFileLock

    /// Opens (creating if needed) the database; what it does about migrations the file lacks is the
    /// configuration's ``MigrationPolicy``. Refused while `broker store restore` swaps the file.
    public init(
        configuration: SQLiteStoreConfiguration,
        logger: Logger,
        metrics: BrokerMetrics = .disabled
    ) async throws {
        var config = Configuration()
        config.label = "broker.sqlite"
        config.busyMode = .timeout(TimeInterval(configuration.busyTimeout.components.seconds))
        config.maximumReaderCount = configuration.maximumReaderCount
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // 16 MiB of page cache per connection (the default is 2): the dispatch reads the due index, users
            // and deliveries in batches, and re-reading pages from the kernel dominated a burst's profile.
            try db.execute(sql: "PRAGMA cache_size = -16384")
        }
        self.fileLock = try StoreFileLock(database: configuration.path, exclusive: false)
        do {
            self.pool = try DatabasePool(path: configuration.path, configuration: config)
        } catch {
            throw EngineError(.storage, "cannot open database at \(configuration.path): \(Self.describe(error))")
        }
        self.logger = logger
        self.metrics = metrics
        self.nodeID = UUID().uuidString.lowercased()
        try await openSchema(configuration.migrations)
    }

    public func probeWrite() async throws {
        // An empty IMMEDIATE transaction: it waits for the write lock like any write.
        try await write { _ in }
    }

    /// Runs a write transaction, turning SQLite errors into ``EngineError``s that carry no SQL.
    func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let started = ContinuousClock.now
        defer { metrics.storeOperation("write", duration: started.duration(to: .now)) }
        do {
            return try await pool.write(updates)
        } catch let error as EngineError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw translate(error)
        }
    }

    func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let started = ContinuousClock.now
        defer { metrics.storeOperation("read", duration: started.duration(to: .now)) }
        do {
            return try await pool.read(value)
        } catch let error as EngineError {
            throw error
        } catch let error as CancellationError {
            throw error
        } catch {
            throw translate(error)
        }
    }

    private func translate(_ error: any Error) -> EngineError {
        if let error = error as? DatabaseError {
            switch error.extendedResultCode {
            case .SQLITE_CONSTRAINT_UNIQUE, .SQLITE_CONSTRAINT_PRIMARYKEY:
                return EngineError(.conflict, "the record already exists")
            case .SQLITE_CONSTRAINT_FOREIGNKEY:
                return EngineError(.notFound, "a referenced record does not exist")
            default:
                break
            }
        }
        logger.error("store failure", metadata: ["store.error": "\(Self.describe(error))"])
        return EngineError(.storage, "the store failed")
    }

    /// The SQLite result code and message only: statements and arguments may hold personal data.
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "SQLite \(error.extendedResultCode.rawValue): \(error.message ?? "")"
        }
        return String(describing: type(of: error))
    }
}

extension DatabaseMigrator {
    func migrate(_ pool: DatabasePool) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            self.asyncMigrate(pool) { result in
                switch result {
                case .success: continuation.resume()
                case .failure(let error): continuation.resume(throwing: error)
                }
            }
        }
    }
}

extension Date {
    var unixSeconds: Double { timeIntervalSince1970 }
    init(unixSeconds: Double) { self.init(timeIntervalSince1970: unixSeconds) }
}
