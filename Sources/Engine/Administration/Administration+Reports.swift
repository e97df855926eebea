import Foundation

extension Administration {
    // MARK: Reports

    /// The tenant's engagement over `from`...`to` (`yyyy-MM-dd`, both included; the last 30 days by the tenant's
    /// date without them, at most 366), from the pre-aggregated daily rows.
    public func engagementReport(
        tenant id: TenantID,
        from: String?,
        to: String?,
        by actor: AdminActor
    ) async throws -> EngagementReport {
        let tenant = try await self.tenant(id, by: actor)
        let today = try LocalDate(parsing: NewDelivery.reportDay(assignedAt: now(), zone: tenant.defaultTimeZone))
        let range = try ReportRange(from: from, to: to, today: today)
        let records = try await store.engagement(tenant: id, from: range.from, through: range.through)
        return EngagementReport(
            tenant: id,
            range: range,
            records: records,
            catalog: try await store.impulses(tenant: id)
        )
    }
}
