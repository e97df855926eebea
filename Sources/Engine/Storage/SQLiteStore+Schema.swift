import GRDB

extension SQLiteStore {
    /// Versioned migrations. Never edit a shipped migration; add a new one.
    /// The newest migration this build knows.
    public static var latestMigration: String { migrator.migrations.last ?? "none" }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-foundation") { db in
            try db.execute(
                sql: """
                    CREATE TABLE tenants (
                        id TEXT PRIMARY KEY NOT NULL,
                        name TEXT NOT NULL,
                        default_language TEXT NOT NULL,
                        default_time_zone TEXT NOT NULL,
                        default_delivery_minute INTEGER NOT NULL,
                        max_pushes_per_day INTEGER NOT NULL,
                        apns_topic TEXT NOT NULL,
                        created_at REAL NOT NULL
                    );
                    CREATE TABLE users (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        tenant_id TEXT NOT NULL REFERENCES tenants(id),
                        username TEXT NOT NULL,
                        password_hash TEXT NOT NULL,
                        language TEXT,
                        life_areas TEXT NOT NULL,
                        enabled INTEGER NOT NULL,
                        time_zone TEXT,
                        delivery_minute INTEGER,
                        quiet_start INTEGER,
                        quiet_end INTEGER,
                        weekdays INTEGER NOT NULL,
                        created_at REAL NOT NULL,
                        UNIQUE (tenant_id, username)
                    );
                    CREATE TABLE impulses (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id),
                        id TEXT NOT NULL,
                        language TEXT NOT NULL,
                        title TEXT NOT NULL,
                        description_short TEXT NOT NULL,
                        description TEXT NOT NULL,
                        duration_minutes INTEGER NOT NULL,
                        action TEXT NOT NULL,
                        single INTEGER NOT NULL,
                        image_urls TEXT NOT NULL,
                        video_url TEXT,
                        web_url TEXT,
                        life_area TEXT NOT NULL,
                        series TEXT,
                        series_position INTEGER,
                        PRIMARY KEY (tenant_id, id)
                    );
                    CREATE TABLE devices (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id),
                        topic TEXT NOT NULL,
                        token TEXT NOT NULL,
                        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        name TEXT NOT NULL,
                        environment TEXT NOT NULL,
                        registered_at REAL NOT NULL,
                        PRIMARY KEY (tenant_id, topic, token)
                    );
                    CREATE INDEX devices_owner ON devices(user_id);
                    CREATE TABLE deliveries (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        tenant_id TEXT NOT NULL,
                        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        impulse_id TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        local_date TEXT,
                        assigned_at REAL NOT NULL,
                        pushed_at REAL,
                        apns_id TEXT,
                        fetched_at REAL,
                        read_at REAL,
                        FOREIGN KEY (tenant_id, impulse_id) REFERENCES impulses(tenant_id, id)
                    );
                    CREATE INDEX deliveries_user ON deliveries(user_id, id);
                    CREATE INDEX deliveries_unread ON deliveries(user_id) WHERE read_at IS NULL;
                    CREATE TABLE changes (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        tenant_id TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        subject TEXT NOT NULL,
                        origin TEXT NOT NULL,
                        at REAL NOT NULL
                    );
                    CREATE INDEX changes_at ON changes(at);
                    CREATE UNIQUE INDEX deliveries_daily ON deliveries(tenant_id, user_id, local_date)
                        WHERE kind = 'scheduled';
                    """
            )
        }
        migrator.registerMigration("v2-device-quarantine") { db in
            try db.execute(sql: "ALTER TABLE devices ADD COLUMN quarantined_at REAL")
        }
        migrator.registerMigration("v3-admin-users") { db in
            try db.execute(sql: "ALTER TABLE users ADD COLUMN is_admin INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v4-scheduling") { db in
            try db.execute(
                sql: """
                    ALTER TABLE deliveries ADD COLUMN settled_at REAL;
                    UPDATE deliveries SET settled_at = COALESCE(pushed_at, assigned_at);
                    CREATE INDEX deliveries_unsettled ON deliveries(id) WHERE settled_at IS NULL;
                    CREATE TABLE schedules (
                        user_id INTEGER PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        tenant_id TEXT NOT NULL,
                        fire_at REAL,
                        local_date TEXT,
                        last_date TEXT
                    );
                    CREATE INDEX schedules_due ON schedules(fire_at) WHERE fire_at IS NOT NULL;
                    INSERT INTO schedules (user_id, tenant_id, fire_at, last_date)
                        SELECT id, tenant_id, CASE WHEN enabled THEN 0 ELSE NULL END,
                            (SELECT MAX(local_date) FROM deliveries d WHERE d.user_id = users.id AND d.kind = 'scheduled')
                        FROM users;
                    CREATE TABLE reminders (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        tenant_id TEXT NOT NULL,
                        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        impulse_id TEXT NOT NULL,
                        fire_at REAL NOT NULL,
                        created_at REAL NOT NULL
                    );
                    CREATE INDEX reminders_due ON reminders(fire_at);
                    CREATE INDEX reminders_user ON reminders(user_id);
                    """
            )
        }
        migrator.registerMigration("v5-unread-covering") { db in
            // Badges count a user's unread deliveries of the tenant: with the tenant in the index the count never
            // reads the table, however many unread deliveries a user has piled up (`read_at` is in it only so
            // that SQLite sees the index covers the query).
            try db.execute(
                sql: """
                    DROP INDEX deliveries_unread;
                    CREATE INDEX deliveries_unread ON deliveries(user_id, tenant_id, read_at) WHERE read_at IS NULL;
                    """
            )
        }
        migrator.registerMigration("v6-device-tombstones") { db in
            // APNs' 410 marks a device gone in place (one page) instead of deleting it from the table and its two
            // indexes at random places (three pages, about 11 us of a burst's CPU per removed token, BENCHMARKS.md
            // round 14); gone rows are purged later in bulk. Every read of devices skips them.
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN removed_at REAL;
                    CREATE INDEX devices_removed ON devices(removed_at) WHERE removed_at IS NOT NULL;
                    """
            )
        }
        migrator.registerMigration("v7-push-expiry") { db in
            // NULL: the default (`end-of-day`).
            try db.execute(sql: "ALTER TABLE tenants ADD COLUMN push_expiry TEXT")
        }
        migrator.registerMigration("v8-administration") { db in
            // Operator accounts, the audit trail of every admin write, and suspended tenants.
            try db.execute(
                sql: """
                    ALTER TABLE tenants ADD COLUMN suspended INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE operators (
                        name TEXT PRIMARY KEY NOT NULL,
                        password_hash TEXT NOT NULL,
                        created_at REAL NOT NULL
                    );
                    CREATE TABLE audit (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        at REAL NOT NULL,
                        actor TEXT NOT NULL,
                        role TEXT NOT NULL,
                        tenant_id TEXT,
                        action TEXT NOT NULL,
                        target TEXT NOT NULL,
                        request_id TEXT
                    );
                    CREATE INDEX audit_tenant ON audit(tenant_id, id);
                    """
            )
        }
        migrator.registerMigration("v9-retired-impulses") { db in
            try db.execute(sql: "ALTER TABLE impulses ADD COLUMN retired INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v10-idempotency-keys") { db in
            // The answers of creating admin requests, per caller and Idempotency-Key; status 0 while running.
            try db.execute(
                sql: """
                    CREATE TABLE idempotency_keys (
                        scope TEXT NOT NULL,
                        key TEXT NOT NULL,
                        request_hash TEXT NOT NULL,
                        status INTEGER NOT NULL,
                        content_type TEXT,
                        location TEXT,
                        body BLOB,
                        created_at REAL NOT NULL,
                        PRIMARY KEY (scope, key)
                    );
                    CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
                    """
            )
        }
        migrator.registerMigration("v11-tenant-defaults") { db in
            // Default quiet hours, the programme's days and the environment of tokens registered without one.
            try db.execute(
                sql: """
                    ALTER TABLE tenants ADD COLUMN default_quiet_start INTEGER;
                    ALTER TABLE tenants ADD COLUMN default_quiet_end INTEGER;
                    ALTER TABLE tenants ADD COLUMN weekdays INTEGER NOT NULL DEFAULT 127;
                    ALTER TABLE tenants ADD COLUMN apns_environment TEXT;
                    """
            )
        }
        migrator.registerMigration("v12-apns-credentials") { db in
            // APNs credentials uploaded over the admin API, sealed (AES-GCM) with the broker's credential key;
            // at most one pending (not yet proven by an accepted push) and one active per tenant.
            try db.execute(
                sql: """
                    ALTER TABLE tenants ADD COLUMN admins_manage_apns INTEGER NOT NULL DEFAULT 0;
                    CREATE TABLE apns_credentials (
                        id TEXT PRIMARY KEY,
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        kind TEXT NOT NULL,
                        team_id TEXT,
                        key_id TEXT,
                        topics TEXT NOT NULL,
                        not_after REAL,
                        fingerprint TEXT NOT NULL,
                        sealed TEXT NOT NULL,
                        state TEXT NOT NULL,
                        created_at REAL NOT NULL,
                        activated_at REAL,
                        last_error TEXT
                    );
                    CREATE INDEX apns_credentials_tenant ON apns_credentials(tenant_id);
                    """
            )
        }
        migrator.registerMigration("v13-engagement-reports") { db in
            // The reports' daily rows, added to in the transactions that change the ledger (EngagementTally), and
            // each delivery's report day. Deliveries recorded before are counted from what they hold: by their
            // local or UTC date, without the no-device/failed split or the scheduler's day-level counts.
            try db.execute(
                sql: """
                    ALTER TABLE deliveries ADD COLUMN report_day TEXT NOT NULL DEFAULT '';
                    UPDATE deliveries SET report_day = COALESCE(local_date, date(assigned_at, 'unixepoch'));
                    CREATE TABLE engagement_days (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        day TEXT NOT NULL,
                        impulse_id TEXT NOT NULL,
                        assigned INTEGER NOT NULL DEFAULT 0,
                        pushed INTEGER NOT NULL DEFAULT 0,
                        no_device INTEGER NOT NULL DEFAULT 0,
                        failed INTEGER NOT NULL DEFAULT 0,
                        fetched INTEGER NOT NULL DEFAULT 0,
                        read INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, day, impulse_id)
                    );
                    CREATE TABLE engagement_read_latency (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        day TEXT NOT NULL,
                        impulse_id TEXT NOT NULL,
                        bucket INTEGER NOT NULL,
                        reads INTEGER NOT NULL,
                        PRIMARY KEY (tenant_id, day, impulse_id, bucket)
                    );
                    CREATE TABLE dispatch_days (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        day TEXT NOT NULL,
                        due INTEGER NOT NULL DEFAULT 0,
                        skipped_stale INTEGER NOT NULL DEFAULT 0,
                        skipped_weekday INTEGER NOT NULL DEFAULT 0,
                        deferred_quiet_hours INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, day)
                    );
                    INSERT INTO engagement_days (tenant_id, day, impulse_id, assigned, pushed, fetched, read)
                    SELECT tenant_id, report_day, impulse_id, count(*), count(pushed_at), count(fetched_at),
                        count(read_at)
                    FROM deliveries GROUP BY tenant_id, report_day, impulse_id;
                    INSERT INTO engagement_read_latency (tenant_id, day, impulse_id, bucket, reads)
                    SELECT tenant_id, report_day, impulse_id, \(Self.latencyBucketSQL("read_at - pushed_at")), count(*)
                    FROM deliveries WHERE read_at IS NOT NULL AND pushed_at IS NOT NULL GROUP BY 1, 2, 3, 4;
                    INSERT INTO dispatch_days (tenant_id, day, due)
                    SELECT tenant_id, local_date, count(*) FROM deliveries WHERE kind = 'scheduled'
                    GROUP BY tenant_id, local_date;
                    """
            )
        }
        migrator.registerMigration("v14-webhooks") { db in
            // Tenants' webhook endpoints, the outbox their events wait in (written in the transaction of the change
            // each tells of), and the latest attempts.
            try db.execute(
                sql: """
                    CREATE TABLE webhook_endpoints (
                        id TEXT PRIMARY KEY,
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        url TEXT NOT NULL,
                        events TEXT NOT NULL,
                        secret TEXT NOT NULL,
                        previous_secret TEXT,
                        previous_secret_expires_at REAL,
                        enabled INTEGER NOT NULL,
                        created_at REAL NOT NULL,
                        delivered INTEGER NOT NULL DEFAULT 0,
                        dropped INTEGER NOT NULL DEFAULT 0,
                        last_attempt_at REAL,
                        last_status INTEGER,
                        last_error TEXT
                    );
                    CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints(tenant_id);
                    CREATE TABLE webhook_outbox (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        tenant_id TEXT NOT NULL,
                        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
                        event TEXT NOT NULL,
                        ordering_key TEXT NOT NULL,
                        data TEXT NOT NULL,
                        created_at REAL NOT NULL,
                        attempts INTEGER NOT NULL DEFAULT 0,
                        next_attempt_at REAL NOT NULL,
                        leased_until REAL NOT NULL DEFAULT 0
                    );
                    CREATE INDEX webhook_outbox_order ON webhook_outbox(endpoint_id, ordering_key, id);
                    CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at);
                    CREATE INDEX webhook_outbox_tenant ON webhook_outbox(tenant_id);
                    CREATE TABLE webhook_attempts (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
                        event_id INTEGER NOT NULL,
                        event TEXT NOT NULL,
                        at REAL NOT NULL,
                        status INTEGER,
                        error TEXT,
                        outcome TEXT NOT NULL,
                        duration REAL NOT NULL
                    );
                    CREATE INDEX webhook_attempts_endpoint ON webhook_attempts(endpoint_id, id);
                    """
            )
        }
        migrator.registerMigration("v15-console-sessions") { db in
            // Console sessions by the SHA-256 of their cookie.
            try db.execute(
                sql: """
                    CREATE TABLE console_sessions (
                        id TEXT PRIMARY KEY,
                        role TEXT NOT NULL,
                        name TEXT NOT NULL,
                        tenant_id TEXT,
                        csrf_token TEXT NOT NULL,
                        created_at REAL NOT NULL,
                        last_seen_at REAL NOT NULL
                    );
                    CREATE INDEX console_sessions_account ON console_sessions(name, tenant_id);
                    """
            )
        }
        migrator.registerMigration("v16-provider-tokens") { db in
            // One APNs provider token per (team, key) for every process on this store (a new table: code of the
            // previous release never reads it).
            try db.execute(
                sql: """
                    CREATE TABLE provider_tokens (
                        team_id TEXT NOT NULL,
                        key_id TEXT NOT NULL,
                        token TEXT NOT NULL,
                        issued_at REAL NOT NULL,
                        PRIMARY KEY (team_id, key_id)
                    );
                    """
            )
        }
        migrator.registerMigration("v17-first-delivery") { db in
            // When users created through administration start (NULL: at their next delivery time), and each
            // schedule row's bound for its first day (0: none but the staleness limit). Columns added with
            // defaults: the previous release's nodes insert and read rows as before.
            try db.execute(
                sql: """
                    ALTER TABLE tenants ADD COLUMN first_delivery TEXT;
                    ALTER TABLE schedules ADD COLUMN not_before REAL NOT NULL DEFAULT 0;
                    """
            )
        }
        migrator.registerMigration("v18-usernames-without-case") { db in
            // Usernames unique without regard to ASCII case (``UsernameMatch``). Names that already differ only
            // in case are kept apart, never merged by guess: the later ones get case_twin 1, 2, ... (by id), and
            // `broker migrate` lists them. Only their rows are written.
            try db.execute(
                sql: """
                    ALTER TABLE users ADD COLUMN case_twin INTEGER NOT NULL DEFAULT 0;
                    UPDATE users SET case_twin = (
                        SELECT COUNT(*) FROM users o
                        WHERE o.tenant_id = users.tenant_id AND lower(o.username) = lower(users.username)
                            AND o.id < users.id
                    )
                    WHERE (tenant_id, lower(username)) IN (
                        SELECT tenant_id, lower(username) FROM users GROUP BY 1, 2 HAVING COUNT(*) > 1
                    );
                    CREATE UNIQUE INDEX users_username_folded ON users(tenant_id, lower(username), case_twin);
                    """
            )
        }
        migrator.registerMigration("v19-device-channels") { db in
            // The push channel of each device (issue 35): every device so far is an iPhone's. A column with a
            // default: the previous release's nodes register APNs devices as before.
            try db.execute(sql: "ALTER TABLE devices ADD COLUMN channel TEXT NOT NULL DEFAULT 'apns'")
        }
        migrator.registerMigration("v20-fcm-credentials") { db in
            // FCM service accounts uploaded over the admin API (issue 35), sealed like APNs credentials, in a
            // rotation of their own: a table of their own, which the previous release's nodes never touch.
            try db.execute(
                sql: """
                    CREATE TABLE fcm_credentials (
                        id TEXT PRIMARY KEY,
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        kind TEXT NOT NULL,
                        team_id TEXT,
                        key_id TEXT,
                        topics TEXT NOT NULL,
                        not_after REAL,
                        fingerprint TEXT NOT NULL,
                        sealed TEXT NOT NULL,
                        state TEXT NOT NULL,
                        created_at REAL NOT NULL,
                        activated_at REAL,
                        last_error TEXT
                    );
                    CREATE INDEX fcm_credentials_tenant ON fcm_credentials(tenant_id);
                    """
            )
        }
        migrator.registerMigration("v21-delivery-channels") { db in
            // The channels that accepted each delivery's push, and the reports' pushes and reads by channel
            // (issue 35). Deliveries pushed before (and by the previous release's nodes during an upgrade) keep
            // none: they were pushed to APNs, and are read as such. The per-channel rows of earlier days are
            // counted from the deliveries still kept.
            try db.execute(
                sql: """
                    ALTER TABLE deliveries ADD COLUMN pushed_channels INTEGER;
                    CREATE TABLE engagement_channels (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        day TEXT NOT NULL,
                        impulse_id TEXT NOT NULL,
                        channel TEXT NOT NULL,
                        pushed INTEGER NOT NULL DEFAULT 0,
                        read INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, day, impulse_id, channel)
                    );
                    INSERT INTO engagement_channels (tenant_id, day, impulse_id, channel, pushed, read)
                    SELECT tenant_id, report_day, impulse_id, 'apns', count(*), count(read_at)
                    FROM deliveries WHERE pushed_at IS NOT NULL GROUP BY tenant_id, report_day, impulse_id;
                    """
            )
        }
        registerDeliveryAndTimingMigrations(&migrator)
        return migrator
    }
}
