import Engine

/// What this build is, for `broker_build_info` (an alert fires when a deployment's nodes differ for long) and
/// `broker --version`.
public enum BrokerBuild {
    /// The release: the date of the last landed change this build was made from, bumped with each release.
    public static let version = "2026.11.28"
    /// The newest migration this build knows, for SQLite and PostgreSQL: nodes that differ here run different
    /// schemas' code.
    public static let schema = "\(SQLiteStore.latestMigration)/\(PostgresStore.latestVersion)"
}
