import Foundation
import PostgresNIO

extension PostgresStore {
    public func importImpulses(_ impulses: [Impulse], tenant: TenantID) async throws -> (inserted: Int, updated: Int) {
        guard impulses.allSatisfy({ $0.tenant == tenant }) else {
            throw EngineError(.invalidInput, "every impulse of an import must belong to the importing tenant")
        }
        return try await write { [self] connection in
            let counts = try await self.upsertImpulses(impulses, tenant: tenant, connection)
            try await self.apply(.tenantChanged(tenant), connection)
            return counts
        }
    }

    func upsertImpulses(
        _ impulses: [Impulse],
        tenant: TenantID,
        _ connection: PostgresConnection
    ) async throws -> (inserted: Int, updated: Int) {
        var inserted = 0
        // One row at a time: an import may name an impulse twice (the later one wins, as in SQLite), which
        // one multi-row upsert refuses. Catalogs are small and imported rarely.
        for impulse in impulses {
            let rows = try await connection.rows(
                """
                INSERT INTO impulses (tenant_id, id, language, title, description_short, description,
                    duration_minutes, action, single, image_urls, video_url, web_url, life_area, series,
                    series_position)
                VALUES (\(tenant.rawValue), \(impulse.id.rawValue), \(impulse.language), \(impulse.title),
                    \(impulse.descriptionShort), \(impulse.description), \(impulse.durationMinutes),
                    \(impulse.action.rawValue), \(impulse.single), \(try StoredForm.encodeURLs(impulse.imageURLs)),
                    \(impulse.videoURL), \(impulse.webURL), \(impulse.lifeArea.rawValue), \(impulse.series),
                    \(impulse.seriesPosition))
                ON CONFLICT (tenant_id, id) DO UPDATE SET language = excluded.language, title = excluded.title,
                    description_short = excluded.description_short, description = excluded.description,
                    duration_minutes = excluded.duration_minutes, action = excluded.action,
                    single = excluded.single, image_urls = excluded.image_urls, video_url = excluded.video_url,
                    web_url = excluded.web_url, life_area = excluded.life_area, series = excluded.series,
                    series_position = excluded.series_position
                RETURNING (xmax = 0)
                """,
                logger
            )
            // xmax is 0 for a row this statement inserted, the updating transaction's id for an updated one.
            if try rows.first?.at(0, as: Bool.self) == true { inserted += 1 }
        }
        return (inserted, impulses.count - inserted)
    }

    static let impulseColumns = """
        tenant_id, id, language, title, description_short, description, duration_minutes, action, single,
            image_urls, video_url, web_url, life_area, series, series_position, retired
        """

    public func impulses(tenant: TenantID) async throws -> [Impulse] {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.impulseColumns) FROM impulses WHERE tenant_id = \(tenant.rawValue)
                ORDER BY id COLLATE "C"
                """,
                logger
            ).map { try Self.impulse(from: $0) }
        }
    }

    public func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse? {
        try await read { [self] connection in
            try await connection.rows(
                """
                SELECT \(unescaped: Self.impulseColumns) FROM impulses
                WHERE tenant_id = \(tenant.rawValue) AND id = \(id.rawValue)
                """,
                logger
            ).first.map { try Self.impulse(from: $0) }
        }
    }

    /// An impulse from `impulseColumns` starting at column `first`.
    static func impulse(from row: PostgresRandomAccessRow, first: Int = 0) throws -> Impulse {
        let action: String = try row.at(first + 7)
        let lifeArea: String = try row.at(first + 12)
        return try Impulse(
            tenant: TenantID(trusted: row.at(first)),
            id: ImpulseID(trusted: row.at(first + 1)),
            language: row.at(first + 2),
            title: row.at(first + 3),
            descriptionShort: row.at(first + 4),
            description: row.at(first + 5),
            durationMinutes: row.at(first + 6),
            action: ImpulseAction(rawValue: action) ?? .read,
            single: row.at(first + 8),
            imageURLs: try StoredForm.decodeURLs(row.at(first + 9)),
            videoURL: row.at(first + 10),
            webURL: row.at(first + 11),
            lifeArea: LifeArea(rawValue: lifeArea) ?? .work,
            series: row.at(first + 13),
            seriesPosition: row.at(first + 14),
            // Joins that read only what a delivery shows leave the column out.
            retired: row.count > first + 15 ? try row.at(first + 15) : false
        )
    }
}
