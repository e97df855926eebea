import Engine
import Foundation
import Logging

/// Learned delivery times proved through the real scheduler and ledger (issues 36 and 45): a ``ReaderWorld``'s
/// readers as users of a tenant that learns, each with their zone, stated time, quiet hours, weekdays and opt-in;
/// each simulated day the scheduler is ticked every half hour on the simulated time, the ledger records each
/// delivery's push at its fire time and its read when the world says it happens (applied when the simulated time
/// reaches it), and the scheduler folds the ledger's outcomes into each user's state as it plans the next day.
///
/// ``WorldScore`` compares each push with a push at the stated time and at the oracle's time on the same day's
/// luck. Deterministic for a world and model.
public struct TimingSimulation: Sendable {
    /// The daily deliveries the ledger recorded at an instant: id, user and local date (a store-specific query).
    public typealias Recorded = @Sendable (Date) async throws -> [(id: Int64, user: Int64, date: String)]

    public let world: any ReaderWorld
    public let model: LearnedTiming
    public let days: Int

    public init(world: any ReaderWorld, model: LearnedTiming = LearnedTiming(), days: Int = 60) {
        self.world = world
        var model = model
        model.enabled = true
        self.model = model
        self.days = days
    }

    /// The tenant the simulation creates (the recorded deliveries' query names it).
    public static let tenantName = "sim"
    /// Monday 2026-01-05, 00:00 UTC.
    public static let start = Date(timeIntervalSince1970: 1_767_571_200)

    /// Runs the world and scores every delivery it recorded.
    public func run(store: any BrokerStore, recorded: Recorded, logger: Logger) async throws -> WorldScore {
        let tenantID = try TenantID(Self.tenantName)
        var tenant = try Tenant(
            id: tenantID,
            name: "Simulation",
            defaultTimeZone: "UTC",
            defaultQuietHours: world.tenantQuietHours,
            weekdays: world.tenantWeekdays,
            apnsTopic: "sim"
        )
        tenant.learnedTiming = model
        try await store.createTenant(tenant)
        _ = try await store.importImpulses(
            try (1...20).map {
                try Impulse(
                    tenant: tenantID,
                    id: ImpulseID("sim-\($0)"),
                    language: "EN",
                    title: "Impulse \($0)",
                    descriptionShort: "",
                    description: "",
                    durationMinutes: 2,
                    action: .read,
                    single: true,
                    imageURLs: [],
                    videoURL: nil,
                    webURL: nil,
                    lifeArea: .health
                )
            },
            tenant: tenantID
        )
        let readers = world.readers.indices.map { ScoredReader($0, world, window: model.windowMinutes) }
        var byUser: [Int64: ScoredReader] = [:]
        for scored in readers {
            let reader = scored.reader
            var new = try NewUser(tenant: tenantID, username: "reader-\(scored.index)", passwordHash: "x")
            new.preferences = DeliveryPreferences(
                timeZone: reader.timeZone,
                deliveryTime: reader.stated,
                quietHours: reader.quietHours,
                weekdays: reader.weekdays
            )
            let user = try await store.createUser(new)
            if reader.optedIn {
                try await store.setTimingOptIn(tenant: tenantID, user: user.id, optedIn: true, audit: nil)
            }
            byUser[user.id.rawValue] = scored
        }
        let scheduler = Scheduler(
            store: store,
            ledger: DeliveryLedger(store: store, catalog: CatalogCache(store: store)),
            gateway: nil,
            configuration: SchedulerConfiguration(batchSize: 500, spreadWindow: .zero),
            logger: logger
        )
        var score = WorldScore(family: world.family, seed: world.seed)
        var delivered: [Int64: Set<Int>] = [:]
        // Reads waiting for the simulated time to reach them, latest first (the next one is popped off the end).
        var reads: [DeliveryMark] = []
        let firstDay = Int(world.start.timeIntervalSince1970) / 86_400
        for step in 0..<(days * 48) {
            let now = world.start.addingTimeInterval(Double(step * 1800))
            var marks: [DeliveryMark] = []
            while let next = reads.last, next.at <= now { marks.append(reads.removeLast()) }
            if !marks.isEmpty { try await store.applyMarks(marks) }
            while try await scheduler.tick(now: now) >= 500 {}
            marks = []
            for row in try await recorded(now) {
                guard let scored = byUser[row.user], let date = try? LocalDate(parsing: row.date) else { continue }
                let day = date.dayNumber - firstDay
                guard day >= 0, day < days else { continue }
                delivered[row.user, default: []].insert(day)
                // A day whose time had passed in the reader's zone before the readers existed (east of UTC) is
                // delivered late by the scheduler's catch-up: recorded and pushed, but not scored.
                if let due = scored.instant(date, scored.reader.stated), due >= world.start {
                    score.score(
                        world,
                        scored,
                        day: day,
                        date: date,
                        pushedAt: now,
                        neverReads: scored.reader.group == "never-reads"
                    )
                }
                let id = DeliveryID(row.id)
                marks.append(
                    DeliveryMark(
                        tenant: tenantID,
                        delivery: id,
                        kind: .pushed(apnsID: "sim-\(row.id)", channels: .apns),
                        at: now
                    )
                )
                if let read = world.readTime(reader: scored.index, pushedAt: now) {
                    reads.append(DeliveryMark(tenant: tenantID, delivery: id, kind: .read, at: max(read, now)))
                }
            }
            if !marks.isEmpty { try await store.applyMarks(marks) }
            reads.sort { $0.at > $1.at }
        }
        // A programme day with no delivery (the first and last day are left out: a zone's day can straddle them).
        for (user, scored) in byUser {
            for day in 1..<(days - 1) where scored.programme.contains(LocalDate(dayNumber: firstDay + day).isoWeekday) {
                if !(delivered[user]?.contains(day) ?? false) { score.missedDays += 1 }
            }
        }
        return score
    }
}
