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
        Migration(
            version: 15,
            name: "first-delivery",
            statements: [
                // When users created through administration start (NULL: at their next delivery time), and each
                // schedule row's bound for its first day (0: none but the staleness limit). A constant default
                // adds the column without rewriting the table; the previous release's nodes insert rows as before.
                "ALTER TABLE tenants ADD COLUMN first_delivery text",
                "ALTER TABLE schedules ADD COLUMN not_before double precision NOT NULL DEFAULT 0",
            ]
        ),
        Migration(
            version: 16,
            name: "usernames-without-case",
            statements: [
                // Usernames unique without regard to ASCII case (``UsernameMatch``). Names that already differ
                // only in case are kept apart, never merged by guess: the later ones get case_twin 1, 2, ... (by
                // id), and `broker migrate` lists them. Only their rows are written.
                "ALTER TABLE users ADD COLUMN case_twin integer NOT NULL DEFAULT 0",
                """
                UPDATE users u SET case_twin = t.twin
                FROM (
                    SELECT id, ROW_NUMBER() OVER (
                        PARTITION BY tenant_id, \(foldedUsername) ORDER BY id
                    ) - 1 AS twin
                    FROM users
                    WHERE (tenant_id, \(foldedUsername)) IN (
                        SELECT tenant_id, \(foldedUsername) FROM users GROUP BY 1, 2 HAVING COUNT(*) > 1
                    )
                ) t
                WHERE u.id = t.id AND t.twin > 0
                """,
                "CREATE UNIQUE INDEX users_username_folded ON users (tenant_id, (\(foldedUsername)), case_twin)",
            ]
        ),
        Migration(
            version: 17,
            name: "device-channels",
            statements: [
                // The push channel of each device (issue 35): every device so far is an iPhone's. A constant
                // default adds the column without rewriting the table; the previous release's nodes register APNs
                // devices as before.
                "ALTER TABLE devices ADD COLUMN channel text NOT NULL DEFAULT 'apns'"
            ]
        ),
        Migration(
            version: 18,
            name: "fcm-credentials",
            statements: [
                // FCM service accounts uploaded over the admin API (issue 35), sealed like APNs credentials, in a
                // rotation of their own: a table of their own, which the previous release's nodes never touch.
                """
                CREATE TABLE fcm_credentials (
                    id text PRIMARY KEY,
                    tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    kind text NOT NULL,
                    team_id text,
                    key_id text,
                    topics text NOT NULL,
                    not_after double precision,
                    fingerprint text NOT NULL,
                    sealed text NOT NULL,
                    state text NOT NULL,
                    created_at double precision NOT NULL,
                    activated_at double precision,
                    last_error text
                )
                """,
                "CREATE INDEX fcm_credentials_tenant ON fcm_credentials (tenant_id)",
            ]
        ),
        Migration(
            version: 19,
            name: "delivery-channels",
            statements: [
                // The channels that accepted each delivery's push, and the reports' pushes and reads by channel
                // (issue 35). Deliveries pushed before (and by the previous release's nodes during an upgrade) keep
                // none: they were pushed to APNs, and are read as such. A nullable column without a default is
                // added without rewriting the table. The per-channel rows of earlier days are counted from the
                // deliveries still kept.
                "ALTER TABLE deliveries ADD COLUMN pushed_channels integer",
                """
                CREATE TABLE engagement_channels (
                    tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    day text NOT NULL,
                    impulse_id text NOT NULL,
                    channel text NOT NULL,
                    pushed bigint NOT NULL DEFAULT 0,
                    read bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (tenant_id, day, impulse_id, channel)
                )
                """,
                """
                INSERT INTO engagement_channels (tenant_id, day, impulse_id, channel, pushed, read)
                SELECT tenant_id, report_day, impulse_id, 'apns', count(*), count(read_at)
                FROM deliveries WHERE pushed_at IS NOT NULL GROUP BY tenant_id, report_day, impulse_id
                """,
            ]
        ),
        Migration(
            version: 20,
            name: "learned-timing",
            statements: [
                // Learned delivery times (issue 36): a tenant's settings (NULL: off), each user's state and each
                // tenant's population. A nullable column and tables of their own: the previous release's nodes
                // never read them, and their erasures remove a user's state through the foreign key.
                "ALTER TABLE tenants ADD COLUMN learned_timing text",
                """
                CREATE TABLE user_timing (
                    user_id bigint PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
                    tenant_id text NOT NULL,
                    opted_in boolean NOT NULL DEFAULT false,
                    evidence text,
                    folded_through text,
                    previous_weekday integer,
                    previous_weekend integer,
                    planned_date text,
                    planned_minute integer,
                    planned_reason text,
                    version bigint NOT NULL DEFAULT 0
                )
                """,
                """
                CREATE TABLE timing_population (
                    tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    kind integer NOT NULL,
                    slot integer NOT NULL,
                    reads double precision NOT NULL DEFAULT 0,
                    misses double precision NOT NULL DEFAULT 0,
                    PRIMARY KEY (tenant_id, kind, slot)
                )
                """,
                // The holdout comparison's counts: folded deliveries per day, arm (0 learned, 1 holdout) and read
                // latency bucket (-1: unread).
                """
                CREATE TABLE timing_outcomes (
                    tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    day text NOT NULL,
                    arm integer NOT NULL,
                    bucket integer NOT NULL,
                    deliveries bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (tenant_id, day, arm, bucket)
                )
                """,
            ]
        ),
        Migration(
            version: 21,
            name: "pushed-devices",
            statements: [
                // The devices of a delivery whose push has its outcome while others of the user's wait (issue 44): a
                // later push goes to the others alone. A nullable column without a default, added without a rewrite;
                // the previous release's nodes never read it.
                "ALTER TABLE deliveries ADD COLUMN pushed_devices text"
            ]
        ),
        Migration(
            version: 22,
            name: "timing-user-weeks",
            statements: [
                // The holdout comparison per user and week (issue 45): its intervals count users, not deliveries. A
                // table of its own, which the previous release's nodes never read; a user's erasure removes their
                // rows through the foreign key.
                """
                CREATE TABLE timing_user_weeks (
                    tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                    user_id bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    week text NOT NULL,
                    arm integer NOT NULL,
                    deliveries bigint NOT NULL DEFAULT 0,
                    within_hour bigint NOT NULL DEFAULT 0,
                    read bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (tenant_id, week, user_id)
                )
                """,
                "CREATE INDEX timing_user_weeks_user ON timing_user_weeks (user_id)",
            ]
        ),
    ]
}
