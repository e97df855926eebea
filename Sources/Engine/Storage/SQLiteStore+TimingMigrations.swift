import Foundation
import GRDB

extension SQLiteStore {
    /// Migrations v22 on (issues 36, 44 and 45), kept apart so that the schema's file stays readable.
    static func registerDeliveryAndTimingMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v22-learned-timing") { db in
            // Learned delivery times (issue 36): a tenant's settings (NULL: off), each user's state, each tenant's
            // population and the holdout comparison's counts. A nullable column and tables of their own: the previous release's nodes never
            // read them, and their erasures remove a user's state through the foreign key.
            try db.execute(
                sql: """
                    ALTER TABLE tenants ADD COLUMN learned_timing TEXT;
                    CREATE TABLE user_timing (
                        user_id INTEGER PRIMARY KEY NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        tenant_id TEXT NOT NULL,
                        opted_in INTEGER NOT NULL DEFAULT 0,
                        evidence TEXT,
                        folded_through TEXT,
                        previous_weekday INTEGER,
                        previous_weekend INTEGER,
                        planned_date TEXT,
                        planned_minute INTEGER,
                        planned_reason TEXT,
                        version INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE TABLE timing_population (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        kind INTEGER NOT NULL,
                        slot INTEGER NOT NULL,
                        reads REAL NOT NULL DEFAULT 0,
                        misses REAL NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, kind, slot)
                    );
                    CREATE TABLE timing_outcomes (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        day TEXT NOT NULL,
                        arm INTEGER NOT NULL,
                        bucket INTEGER NOT NULL,
                        deliveries INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, day, arm, bucket)
                    );
                    """
            )
        }
        migrator.registerMigration("v23-pushed-devices") { db in
            // The devices of a delivery whose push has its outcome while others of the user's wait (issue 44): a
            // later push goes to the others alone. A nullable column: the previous release's nodes never read it.
            try db.execute(sql: "ALTER TABLE deliveries ADD COLUMN pushed_devices TEXT")
        }
        migrator.registerMigration("v24-timing-user-weeks") { db in
            // The holdout comparison per user and week (issue 45): its intervals count users, not deliveries. A
            // table of its own, which the previous release's nodes never read; a user's erasure removes their rows.
            try db.execute(
                sql: """
                    CREATE TABLE timing_user_weeks (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        week TEXT NOT NULL,
                        arm INTEGER NOT NULL,
                        deliveries INTEGER NOT NULL DEFAULT 0,
                        within_hour INTEGER NOT NULL DEFAULT 0,
                        read INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (tenant_id, week, user_id)
                    );
                    CREATE INDEX timing_user_weeks_user ON timing_user_weeks (user_id);
                    """
            )
        }
    }
}
