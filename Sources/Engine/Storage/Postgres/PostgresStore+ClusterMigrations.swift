extension PostgresStore {
    /// Migrations for running on several machines. Each one only adds (expand/contract): the previous release's
    /// nodes keep working on the schema while the new release's nodes start.
    static let clusterMigrations: [Migration] = [
        Migration(
            version: 13,
            name: "provider-tokens",
            statements: [
                // One APNs provider token per (team, key) for the whole deployment.
                """
                CREATE TABLE provider_tokens (
                    team_id text NOT NULL,
                    key_id text NOT NULL,
                    token text NOT NULL,
                    issued_at double precision NOT NULL,
                    PRIMARY KEY (team_id, key_id)
                )
                """
            ]
        ),
        Migration(
            version: 14,
            name: "nodes",
            statements: [
                // The nodes that keep a heartbeat: a silent one's claims and leases end within seconds.
                """
                CREATE TABLE nodes (
                    id text PRIMARY KEY,
                    host text NOT NULL,
                    started_at double precision NOT NULL,
                    last_seen_at double precision NOT NULL
                )
                """
                // No index on the leases' owner: every lease would then be written out of place, in each burst,
                // for the sake of a scan when a node dies (rare, and of the unsettled deliveries only).
            ]
        ),
    ]
}
