import Engine
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Counts as the reports show them, with the read rate and the median time from push to read.
struct EngagementCountsBody: Encodable, Sendable {
    var assigned: Int
    var pushed: Int
    var noDevice: Int
    var failed: Int
    var fetched: Int
    var read: Int
    var readRate: Double?
    var medianSecondsToRead: Int?
    /// Every channel by name (`apns`, `fcm`).
    var channels: [String: ChannelCountsBody]

    init(_ counts: EngagementCounts) {
        (assigned, pushed, noDevice, failed) = (counts.assigned, counts.pushed, counts.noDevice, counts.failed)
        (fetched, read, readRate) = (counts.fetched, counts.read, counts.readRate)
        medianSecondsToRead = counts.medianSecondsToRead.map { Int($0.rounded()) }
        channels = Dictionary(
            uniqueKeysWithValues: PushChannel.allCases.map {
                ($0.rawValue, ChannelCountsBody(counts.channels[$0] ?? ChannelCounts()))
            }
        )
    }
}

/// One channel's pushed deliveries and their reads.
struct ChannelCountsBody: Encodable, Sendable {
    var pushed: Int
    var read: Int
    var readRate: Double?

    init(_ counts: ChannelCounts) {
        (pushed, read, readRate) = (counts.pushed, counts.read, counts.readRate)
    }
}

struct DispatchCountsBody: Encodable, Sendable {
    var active: Int
    var due: Int
    var skippedWeekday: Int
    var skippedStale: Int
    var deferredQuietHours: Int

    init(_ counts: DispatchCounts) {
        (active, due, skippedWeekday) = (counts.active, counts.due, counts.skippedWeekday)
        (skippedStale, deferredQuietHours) = (counts.skippedStale, counts.deferredQuietHours)
    }
}

/// A tenant's engagement report: per day, per impulse, per life area, and in total.
struct EngagementReportBody: Encodable, Sendable {
    struct Day: Encodable, Sendable {
        var day: String
        var dispatch: DispatchCountsBody
        var counts: EngagementCountsBody
    }

    struct Impulse: Encodable, Sendable {
        var impulseID: String
        var title: String?
        var lifeArea: String?
        var counts: EngagementCountsBody
    }

    struct LifeArea: Encodable, Sendable {
        var lifeArea: String?
        var counts: EngagementCountsBody
    }

    var tenant: String
    var from: String
    var to: String
    var total: EngagementCountsBody
    var days: [Day]
    var impulses: [Impulse]
    var lifeAreas: [LifeArea]
    /// Learned delivery times against the holdout, per week (empty unless the tenant learned times in the range).
    var learnedTiming: [TimingWeekBody]
    /// The same over the whole range (absent unless the tenant learned times in it).
    var learnedTimingOverall: TimingWeekBody?

    init(_ report: EngagementReport) {
        tenant = report.tenant.rawValue
        from = report.range.from.description
        to = report.range.through.description
        total = EngagementCountsBody(report.total)
        days = report.days.map {
            Day(
                day: $0.day.description,
                dispatch: DispatchCountsBody($0.dispatch),
                counts: EngagementCountsBody($0.counts)
            )
        }
        impulses = report.impulses.map {
            Impulse(
                impulseID: $0.impulse.rawValue,
                title: $0.title,
                lifeArea: $0.lifeArea?.rawValue,
                counts: EngagementCountsBody($0.counts)
            )
        }
        lifeAreas = report.lifeAreas.map {
            LifeArea(lifeArea: $0.lifeArea?.rawValue, counts: EngagementCountsBody($0.counts))
        }
        learnedTiming = report.timing.map(TimingWeekBody.init)
        learnedTimingOverall = report.timingOverall.map(TimingWeekBody.init)
    }
}

/// One week (or the whole range) of learned times against the holdout: per arm the users the model may move, the
/// share of deliveries read within the hour of the push (the goal's measure) and read at all, and the median time
/// to read; learned minus holdout with 95% intervals that count users, not deliveries.
struct TimingWeekBody: Encodable, Sendable {
    struct Arm: Encodable, Sendable {
        var users: Int
        var deliveries: Int
        var readWithinHour: Int
        var withinHourRate: Double?
        var read: Int
        var readRate: Double?
        var medianSecondsToRead: Int?

        init(_ users: TimingArmComparison.Arm, _ counts: TimingArmCounts) {
            (self.users, deliveries, readWithinHour) = (users.users, users.deliveries, users.withinHour)
            (withinHourRate, read, readRate) = (users.withinHourRate, users.read, users.readRate)
            medianSecondsToRead = counts.medianSecondsToRead.map { Int($0.rounded()) }
        }
    }

    var weekStart: String
    var learned: Arm
    var holdout: Arm
    /// Learned minus holdout, with the interval and whether it leaves 0 out.
    var withinHourDifference: TimingArmComparison.Difference?
    var readDifference: TimingArmComparison.Difference?

    init(_ week: TimingWeek) {
        weekStart = week.weekStart.description
        learned = Arm(week.users.learned, week.learned)
        holdout = Arm(week.users.holdout, week.holdout)
        withinHourDifference = week.users.withinHour
        readDifference = week.users.read
    }
}

extension AdminAPI {
    /// The engagement report of a range of days (`from`, `to`; the last 30 days without them), as JSON, or one of
    /// its tables as CSV (`/reports/engagement/days.csv`, `impulses.csv`, `life-areas.csv`,
    /// `channels.csv`, `learned-timing.csv`).
    func addReportRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        @Sendable func report(
            _ request: Request,
            _ actor: AdminActor,
            _ tenant: Tenant
        ) async throws -> EngagementReport {
            // The range is the query's: a bad one is 400 invalid-query, as every bad query value is.
            let from = request.uri.queryParameters["from"].map(String.init)
            let to = request.uri.queryParameters["to"].map(String.init)
            do {
                return try await administration.engagementReport(tenant: tenant.id, from: from, to: to, by: actor)
            } catch let error as EngineError where error.code == .invalidInput {
                throw Problem.badRequest(error.message, code: "invalid-query")
            }
        }
        tenantResource(
            router,
            "/reports/engagement",
            api: api,
            scheme: scheme,
            [
                .get: { request, _, actor, tenant in
                    try Representation.response(
                        EngagementReportBody(try await report(request, actor, tenant)),
                        for: request
                    )
                }
            ]
        )
        tenantResource(
            router,
            "/reports/engagement/:table",
            api: api,
            scheme: scheme,
            [
                .get: { request, context, actor, tenant in
                    let file = try Self.parameter("table", context)
                    let table = try Problem.validating { () throws(EngineError) in
                        try EngagementReport.Table(file: file)
                    }
                    return Self.csvResponse(try await report(request, actor, tenant), table: table, tenant: tenant.id)
                }
            ]
        )
    }

    /// One table of a report as a CSV attachment (the admin API's and the console's).
    static func csvResponse(
        _ report: EngagementReport,
        table: EngagementReport.Table,
        tenant: TenantID,
        headers: HTTPFields = [:]
    ) -> Response {
        let name = "engagement-\(tenant)-\(table.rawValue)-\(report.range.from)-\(report.range.through).csv"
        var headers = headers
        headers[.contentType] = "text/csv; charset=utf-8; header=present"
        headers[.contentDisposition] = "attachment; filename=\"\(name)\""
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: report.csv(table))))
    }
}
