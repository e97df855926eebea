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
        )
    ]
}
