import Foundation
import Logging
import PostgresNIO

/// The statements a burst runs thousands of times, prepared once per connection (named statements: parsed and
/// planned once, then only bound and executed). Each takes its rows as arrays (`UNNEST`), so one statement serves
/// a batch of any size.
extension PostgresStore {
    /// Claims up to `limit` due rows after the cursor for `node` until `until`, with their users' columns.
    struct ClaimDueRows: PostgresPreparedStatement {
        static let sql = """
            WITH picked AS (
                SELECT user_id FROM schedules
                WHERE fire_at IS NOT NULL AND fire_at <= $1 AND (fire_at, user_id) > ($2, $3)
                    AND (claimed_until IS NULL OR claimed_until < $4 OR claimed_by = $5)
                ORDER BY fire_at, user_id LIMIT $6
                FOR UPDATE SKIP LOCKED
            ), claimed AS (
                UPDATE schedules s SET claimed_by = $5, claimed_until = $7
                FROM picked WHERE s.user_id = picked.user_id
                RETURNING s.user_id, s.tenant_id, s.fire_at, s.local_date, s.last_date, s.not_before
            )
            SELECT \(scheduleEntryColumns)
            FROM claimed s JOIN users u ON u.id = s.user_id
            ORDER BY s.fire_at, s.user_id
            """
        typealias Row = ScheduleEntry

        var notAfter: Double
        var afterFireAt: Double
        var afterUser: Int64
        var now: Double
        var node: String
        var limit: Int
        var until: Double

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 7)
            bindings.append(notAfter)
            bindings.append(afterFireAt)
            bindings.append(afterUser)
            bindings.append(now)
            bindings.append(node)
            bindings.append(limit)
            bindings.append(until)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> ScheduleEntry {
            try PostgresStore.scheduleEntry(from: row.makeRandomAccess())
        }
    }

    /// Moves a batch's rows of the due index (compare-and-set on the fire time read), records the delivered date,
    /// and releases the claims. A next fire time of NaN takes the row out of the index. Returns the users whose
    /// row moved among those `watched` (a decision the day-level report counts when it took effect).
    struct MoveSchedules: PostgresPreparedStatement {
        static let sql = """
            WITH moved AS (
                UPDATE schedules s SET
                    last_date = CASE WHEN v.delivered = '' THEN s.last_date
                        ELSE GREATEST(COALESCE(s.last_date, ''), v.delivered) END,
                    fire_at = CASE WHEN s.fire_at = v.expected THEN NULLIF(v.next_fire, 'NaN') ELSE s.fire_at END,
                    local_date = CASE WHEN s.fire_at = v.expected THEN NULLIF(v.next_date, '') ELSE s.local_date END,
                    claimed_by = NULL, claimed_until = NULL
                FROM UNNEST($1::bigint[], $2::text[], $3::float8[], $4::float8[], $5::text[], $6::text[],
                    $7::boolean[]) AS v(owner, tenant, expected, next_fire, next_date, delivered, watched)
                    -- The row as it was: whether the compare-and-set held, for the watched ones.
                    LEFT JOIN schedules o ON v.watched AND o.user_id = v.owner AND o.tenant_id = v.tenant
                WHERE s.user_id = v.owner AND s.tenant_id = v.tenant
                RETURNING s.user_id, v.watched, o.fire_at = v.expected AS moved
            )
            SELECT user_id FROM moved WHERE watched AND moved
            """
        typealias Row = Int64

        var users: [Int64]
        var tenants: [String]
        var expected: [Double]
        var nextFire: [Double]
        var nextDate: [String]
        var delivered: [String]
        var watched: [Bool]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 7)
            bindings.append(users)
            bindings.append(tenants)
            bindings.append(expected)
            bindings.append(nextFire)
            bindings.append(nextDate)
            bindings.append(delivered)
            bindings.append(watched)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
    }

    /// Pushed marks: the first mark of a delivery wins. A delivery they settle leaves `unsettled_deliveries`.
    struct PushedMarks: PostgresPreparedStatement {
        static let sql = """
            WITH marked AS (
                UPDATE deliveries d SET pushed_at = v.at, apns_id = v.apns_id, pushed_channels = v.channels,
                    settled_at = COALESCE(d.settled_at, v.at)
                FROM UNNEST($1::bigint[], $2::text[], $3::float8[], $4::text[], $5::integer[])
                    AS v(id, tenant, at, apns_id, channels)
                WHERE d.id = v.id AND d.tenant_id = v.tenant AND d.pushed_at IS NULL
                RETURNING d.id, d.tenant_id, d.report_day, d.impulse_id, d.user_id, d.pushed_channels
            ), settled AS (
                DELETE FROM unsettled_deliveries u USING marked WHERE u.delivery_id = marked.id
            )
            SELECT tenant_id, report_day, impulse_id, id, user_id, false, pushed_channels FROM marked
            """
        typealias Row = MarkedRow

        var ids: [Int64]
        var tenants: [String]
        var at: [Double]
        var apnsIDs: [String]
        var channels: [Int]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            bindings.append(ids)
            bindings.append(tenants)
            bindings.append(at)
            bindings.append(apnsIDs)
            bindings.append(channels)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> MarkedRow { try MarkedRow(row) }
    }

    /// Settled marks (rejected or dropped pushes, or no device): the first time wins.
    struct SettledMarks: PostgresPreparedStatement {
        static let sql = """
            WITH marked AS (
                UPDATE deliveries d SET settled_at = v.at
                FROM UNNEST($1::bigint[], $2::text[], $3::float8[], $4::boolean[]) AS v(id, tenant, at, no_device)
                WHERE d.id = v.id AND d.tenant_id = v.tenant AND d.settled_at IS NULL
                RETURNING d.id, d.tenant_id, d.report_day, d.impulse_id, d.user_id, v.no_device
            ), settled AS (
                DELETE FROM unsettled_deliveries u USING marked WHERE u.delivery_id = marked.id
            )
            SELECT tenant_id, report_day, impulse_id, id, user_id, no_device, NULL::integer FROM marked
            """
        typealias Row = MarkedRow

        var ids: [Int64]
        var tenants: [String]
        var at: [Double]
        var noDevice: [Bool]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(ids)
            bindings.append(tenants)
            bindings.append(at)
            bindings.append(noDevice)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> MarkedRow { try MarkedRow(row) }
    }

    /// A delivery a mark statement changed: (tenant, report day, impulse, delivery, user, no device).
    struct MarkedRow: Sendable {
        var tenant: TenantID
        var day: String
        var impulse: ImpulseID
        var delivery: Int64
        var user: Int64
        var noDevice: Bool
        /// A pushed mark's channels (nil for a settled one).
        var channels: Int?

        init(_ row: PostgresRow) throws {
            let (tenant, day, impulse, delivery, user, noDevice, channels) = try row.decode(
                (String, String, String, Int64, Int64, Bool, Int?).self
            )
            (self.tenant, self.day, self.impulse) = (TenantID(trusted: tenant), day, ImpulseID(trusted: impulse))
            (self.delivery, self.user, self.noDevice, self.channels) = (delivery, user, noDevice, channels)
        }
    }

    /// A batch's devices, each with its owner's unread count in the tenant (the badge) and time zone.
    struct PushTargetRows: PostgresPreparedStatement {
        static let sql = """
            SELECT d.tenant_id, d.topic, d.token, d.user_id, d.name, d.environment, d.registered_at, d.quarantined_at,
                d.channel,
                (SELECT count(*) FROM deliveries x
                    WHERE x.user_id = d.user_id AND x.tenant_id = d.tenant_id AND x.read_at IS NULL),
                u.time_zone
            FROM devices d JOIN users u ON u.id = d.user_id
            WHERE d.user_id = ANY($1::bigint[]) AND d.tenant_id = $2 AND d.removed_at IS NULL
            ORDER BY d.registered_at DESC
            """
        typealias Row = (device: Device, unread: Int, timeZone: String?)

        var users: [Int64]
        var tenant: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(users)
            bindings.append(tenant)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let columns = row.makeRandomAccess()
            return (try PostgresStore.device(from: columns), try columns.at(9), try columns.at(10))
        }
    }
}

extension PostgresConnection {
    /// Every row of a prepared statement's result.
    @discardableResult
    func all<Statement: PostgresPreparedStatement>(
        _ statement: Statement,
        _ logger: Logger
    ) async throws -> [Statement.Row] {
        var rows: [Statement.Row] = []
        for try await row in try await execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}
