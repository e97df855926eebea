import Foundation
import GRDB
import Logging
import PostgresNIO
import Testing

@testable import Engine

/// The shared store test suite's ground: every store test runs on each ``StoreKind`` from the same fixture, so a
/// behaviour one adapter has and the other lacks fails there. (EngineTests' `StoreTests`, `SharedStoreTests`,
/// `StoreDutiesTests` and the rest run on it; a third adapter would be one more case here.)
/// The stores every store test runs against: the embedded SQLite file and PostgreSQL.
public enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    public var testDescription: String { rawValue }
}

/// A fresh store (a new SQLite file, or a new database on the test cluster) with two tenants, each with users `a`
/// and `b`, and two impulses.
public struct StoreFixture: Sendable {
    public let kind: StoreKind
    /// The SQLite file's path or the PostgreSQL database's URL.
    public let location: String
    public let store: any BrokerStore
    public let acme: TenantID
    public let globex: TenantID
    public let a: User
    public let b: User
    public let globexA: User

    public static let logger: Logger = {
        var logger = Logger(label: "engine-tests")
        logger.logLevel = .critical
        return logger
    }()

    /// A store on `location`, as a second process (another node) opens it.
    public static func open(_ kind: StoreKind, _ location: String) async throws -> any BrokerStore {
        switch kind {
        case .sqlite: try await SQLiteStore(configuration: .init(path: location), logger: logger)
        case .postgres:
            try await PostgresStore(configuration: try sharedConfiguration(location), logger: logger)
        }
    }

    /// How long claims and leases last in the tests: a test that plays a restart waits this long for the leases
    /// of the "process that died" to end (a real restart has a new node id, and waits as long).
    /// 5 s: CI's whole suite on two cores took over 2 s between two steps of a test that needs a lease to hold.
    public static let leaseTime = Duration.seconds(5)

    public static func sharedConfiguration(_ url: String) throws -> PostgresStoreConfiguration {
        var configuration = try PostgresStoreConfiguration(url: url)
        configuration.claimTime = leaseTime
        configuration.leaseTime = leaseTime
        return configuration
    }

    public static func make(_ kind: StoreKind = .sqlite) async throws -> StoreFixture {
        let location =
            switch kind {
            case .sqlite: TemporaryDirectories.make("engine-tests-") + "/broker.sqlite"
            case .postgres: try await PostgresTestDatabases.makeMigrated() + "?sslmode=disable&pool=4"
            }
        let store = try await open(kind, location)
        let acme = try TenantID("acme")
        let globex = try TenantID("globex")
        try await store.createTenant(try Tenant(id: acme, name: "Acme", apnsTopic: "t"))
        try await store.createTenant(try Tenant(id: globex, name: "Globex", apnsTopic: "t"))
        let a = try await store.createUser(try NewUser(tenant: acme, username: "a", passwordHash: "x"))
        let b = try await store.createUser(try NewUser(tenant: acme, username: "b", passwordHash: "x"))
        let globexA = try await store.createUser(try NewUser(tenant: globex, username: "a", passwordHash: "x"))
        for tenant in [acme, globex] {
            _ = try await store.importImpulses(
                try ["one", "two"].map {
                    try Impulse(
                        tenant: tenant,
                        id: ImpulseID($0),
                        language: "EN",
                        title: $0,
                        descriptionShort: "",
                        description: "",
                        durationMinutes: 1,
                        action: .read,
                        single: true,
                        imageURLs: [],
                        videoURL: nil,
                        webURL: nil,
                        lifeArea: .work
                    )
                },
                tenant: tenant
            )
        }
        return StoreFixture(
            kind: kind,
            location: location,
            store: store,
            acme: acme,
            globex: globex,
            a: a,
            b: b,
            globexA: globexA
        )
    }

    /// The SQLite store, for the tests of what only it has.
    public var sqlite: SQLiteStore {
        get throws { try #require(store as? SQLiteStore) }
    }

    /// The rows of a query written for both stores, every value as text (cast in the query: `CAST(x AS TEXT)`).
    public func texts(_ sql: String) async throws -> [[String?]] {
        switch kind {
        case .sqlite:
            try await sqlite.read { db in
                try Row.fetchAll(db, sql: sql).map { row in
                    row.databaseValues.map { String.fromDatabaseValue($0) }
                }
            }
        case .postgres:
            try await (try #require(store as? PostgresStore)).read { connection in
                var rows: [[String?]] = []
                for try await row in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Self.logger) {
                    rows.append(try row.map { try $0.decode(String?.self) })
                }
                return rows
            }
        }
    }

    /// How many rows `table` holds, the ones no read of the store shows included.
    public func count(_ table: String) async throws -> Int {
        Int(try await texts("SELECT CAST(COUNT(*) AS TEXT) FROM \(table)").first?.first?.flatMap { $0 } ?? "") ?? -1
    }

    public func device(
        _ owner: User,
        token: String = String(repeating: "ab", count: 32),
        at seconds: Double = 1000,
        channel: PushChannel = .apns
    ) throws -> Device {
        try Device(
            tenant: owner.tenant,
            topic: "t",
            token: DeviceToken(token, channel: channel),
            owner: owner.id,
            name: "phone",
            environment: .production,
            registeredAt: Date(timeIntervalSince1970: seconds),
            channel: channel
        )
    }
}
