import Foundation

/// Where the PostgreSQL store connects and how: parsed from a `postgres://` URL.
///
/// `postgres://user[:password]@host[:port]/database?sslmode=...&sslrootcert=...&pool=...`. The password may be
/// left out of the URL and given separately (from a file or the environment: see the README), so that it never
/// appears in a process list or a configuration that is shared.
public struct PostgresStoreConfiguration: Sendable, Equatable {
    /// libpq's `sslmode` values the broker understands.
    public enum TLSMode: String, Sendable, Equatable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, without verifying its certificate (libpq's default).
        case prefer
        /// TLS or no connection, without verifying the certificate.
        case require
        /// TLS, and the certificate must chain to a trusted root (`sslrootcert`, or the system's).
        case verifyCA = "verify-ca"
        /// As `verify-ca`, and the certificate must name the host.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// A PEM file of roots to verify the server's certificate with (`sslrootcert`); nil: the system's.
    public var rootCertificates: String?
    /// Connections in the pool (`pool`, 16 by default).
    public var maximumConnections: Int
    /// How long a connection attempt may take.
    public var connectTimeout: Duration
    /// The server cancels a statement that runs longer (`statement_timeout`), and one waiting for a lock longer
    /// than `lockTimeout`: a stuck database fails a request instead of holding it forever.
    public var statementTimeout: Duration
    public var lockTimeout: Duration
    /// How long a due row this node's scheduler took stays its own (other nodes skip it); a dead node's claims
    /// end after this.
    public var claimTime: Duration = .seconds(120)
    /// How long an unsettled delivery this node is pushing stays its own; after that this node's sweep takes it
    /// again, and so does another node's once this node is gone from `nodes` (or if it keeps no heartbeat), under
    /// the same apns-id and collapse id.
    public var leaseTime: Duration = .seconds(60)
    /// How often this node records in the `nodes` table that it is alive.
    public var heartbeatInterval: Duration = .seconds(3)
    /// How long a node may go without a heartbeat before any other node ends its claims and leases (long before
    /// `claimTime` and `leaseTime`, which still bound the claims of nodes that keep no heartbeat).
    public var nodeSilence: Duration = .seconds(10)
    /// Whether opening applies the migrations the database lacks.
    public var migrations: MigrationPolicy = .apply

    public init(
        host: String,
        port: Int = 5432,
        username: String,
        password: String? = nil,
        database: String,
        tls: TLSMode = .prefer,
        rootCertificates: String? = nil,
        maximumConnections: Int = 16,
        connectTimeout: Duration = .seconds(10),
        statementTimeout: Duration = .seconds(30),
        lockTimeout: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.rootCertificates = rootCertificates
        self.maximumConnections = maximumConnections
        self.connectTimeout = connectTimeout
        self.statementTimeout = statementTimeout
        self.lockTimeout = lockTimeout
    }

    /// Whether `text` names a PostgreSQL database rather than a SQLite file.
    public static func isURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses a `postgres://` (or `postgresql://`) URL. Errors name the part that is wrong, never the password.
    public init(url text: String) throws(EngineError) {
        guard Self.isURL(text), let components = URLComponents(string: text) else {
            throw EngineError(.invalidInput, "the database URL must look like postgres://user@host:port/database")
        }
        guard let host = components.host, !host.isEmpty else {
            throw EngineError(.invalidInput, "the database URL names no host")
        }
        guard let username = components.user, !username.isEmpty else {
            throw EngineError(.invalidInput, "the database URL names no user (postgres://user@host/database)")
        }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw EngineError(.invalidInput, "the database URL names no database (postgres://user@host/database)")
        }
        self.init(
            host: host,
            port: components.port ?? 5432,
            username: username,
            password: components.password,
            database: database
        )
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else {
                    let known = TLSMode.allCases.map(\.rawValue).joined(separator: ", ")
                    throw EngineError(.invalidInput, "sslmode must be one of \(known), not \(value)")
                }
                tls = mode
            case "sslrootcert": rootCertificates = value
            case "pool":
                guard let size = Int(value), (1...200).contains(size) else {
                    throw EngineError(.invalidInput, "pool must be a number of connections within 1...200")
                }
                maximumConnections = size
            case "connect_timeout":
                guard let seconds = Int(value), (1...300).contains(seconds) else {
                    throw EngineError(.invalidInput, "connect_timeout must be seconds within 1...300")
                }
                connectTimeout = .seconds(seconds)
            case "statement_timeout":
                guard let seconds = Int(value), (1...3600).contains(seconds) else {
                    throw EngineError(.invalidInput, "statement_timeout must be seconds within 1...3600")
                }
                statementTimeout = .seconds(seconds)
            default:
                throw EngineError(
                    .invalidInput,
                    "unknown database URL parameter \(item.name) (sslmode, sslrootcert, pool, connect_timeout, "
                        + "statement_timeout)"
                )
            }
        }
        if rootCertificates != nil, tls != .verifyCA, tls != .verifyFull {
            throw EngineError(.invalidInput, "sslrootcert needs sslmode=verify-ca or verify-full")
        }
    }

    /// The URL without its password, for logs and `/inspect`.
    public var redacted: String {
        "postgres://\(username)@\(host):\(port)/\(database)?sslmode=\(tls.rawValue)"
    }
}
