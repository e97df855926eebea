import Foundation
import GRDB

extension SQLiteStore {
    public func importImpulses(_ impulses: [Impulse], tenant: TenantID) async throws -> (inserted: Int, updated: Int) {
        guard impulses.allSatisfy({ $0.tenant == tenant }) else {
            throw EngineError(.invalidInput, "every impulse of an import must belong to the importing tenant")
        }
        return try await write { db in
            let counts = try self.upsertImpulses(impulses, tenant: tenant, db)
            try self.apply(.tenantChanged(tenant), db)
            return counts
        }
    }

    func upsertImpulses(_ impulses: [Impulse], tenant: TenantID, _ db: Database) throws -> (inserted: Int, updated: Int)
    {
        var inserted = 0
        let exists = try db.cachedStatement(sql: "SELECT 1 FROM impulses WHERE tenant_id = ? AND id = ?")
        let upsert = try db.cachedStatement(
            sql: """
                INSERT INTO impulses (tenant_id, id, language, title, description_short, description,
                    duration_minutes, action, single, image_urls, video_url, web_url, life_area, series, series_position)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (tenant_id, id) DO UPDATE SET language = excluded.language, title = excluded.title,
                    description_short = excluded.description_short, description = excluded.description,
                    duration_minutes = excluded.duration_minutes, action = excluded.action, single = excluded.single,
                    image_urls = excluded.image_urls, video_url = excluded.video_url, web_url = excluded.web_url,
                    life_area = excluded.life_area, series = excluded.series, series_position = excluded.series_position
                """
        )
        for impulse in impulses {
            if try Bool.fetchOne(exists, arguments: [tenant.rawValue, impulse.id.rawValue]) == nil {
                inserted += 1
            }
            try upsert.execute(arguments: [
                tenant.rawValue, impulse.id.rawValue, impulse.language, impulse.title, impulse.descriptionShort,
                impulse.description, impulse.durationMinutes, impulse.action.rawValue, impulse.single,
                try StoredForm.encodeURLs(impulse.imageURLs), impulse.videoURL, impulse.webURL,
                impulse.lifeArea.rawValue,
                impulse.series, impulse.seriesPosition,
            ])
        }
        return (inserted, impulses.count - inserted)
    }

    public func impulses(tenant: TenantID) async throws -> [Impulse] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT * FROM impulses WHERE tenant_id = ? ORDER BY id",
                arguments: [tenant.rawValue]
            )
            .map { try Self.impulse(from: $0) }
        }
    }

    public func impulse(tenant: TenantID, id: ImpulseID) async throws -> Impulse? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: "SELECT * FROM impulses WHERE tenant_id = ? AND id = ?",
                arguments: [tenant.rawValue, id.rawValue]
            ).map { try Self.impulse(from: $0) }
        }
    }

    /// Reads an impulse from a row whose impulse columns may carry a prefix (for joins).
    static func impulse(from row: Row, prefix: String = "") throws -> Impulse {
        let action: String = row[prefix + "action"]
        let lifeArea: String = row[prefix + "life_area"]
        return try Impulse(
            tenant: TenantID(trusted: row[prefix + "tenant_id"]),
            id: ImpulseID(trusted: row[prefix + "id"]),
            language: row[prefix + "language"],
            title: row[prefix + "title"],
            descriptionShort: row[prefix + "description_short"],
            description: row[prefix + "description"],
            durationMinutes: row[prefix + "duration_minutes"],
            action: ImpulseAction(rawValue: action) ?? .read,
            single: row[prefix + "single"],
            imageURLs: try StoredForm.decodeURLs(row[prefix + "image_urls"]),
            videoURL: row[prefix + "video_url"],
            webURL: row[prefix + "web_url"],
            lifeArea: LifeArea(rawValue: lifeArea) ?? .work,
            series: row[prefix + "series"],
            seriesPosition: row[prefix + "series_position"],
            // Joins that read only what a delivery shows leave the column out.
            retired: (row[prefix + "retired"] as Bool?) ?? false
        )
    }
}
