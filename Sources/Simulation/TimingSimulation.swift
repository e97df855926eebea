import Engine
import Foundation
import Logging

/// Learned delivery times proved through the real scheduler and ledger (issue 36, item 4): simulated readers
/// (``SimulatedReaders``) as users of a tenant that learns, in UTC, on a programme without Sundays and with quiet
/// hours 21:00-07:00; each simulated day the scheduler is ticked every half hour on the simulated time, the ledger
/// records each delivery's push at its fire time and its read when the reader's latent curve says so, and the
/// scheduler folds the ledger's outcomes into each user's state as it plans the next day.
///
/// Each user set their stated time themselves and opted in (the opt-in path is the one taken). The same day's luck
/// decides whether a push at the learned time, at the stated time (fixed times) or at the oracle's best half hour
/// is read within the hour, so the three rates meet the same world. Deterministic for a seed.
public struct TimingSimulation: Sendable {
    public struct Rates: Sendable, Equatable, CustomStringConvertible {
        public var learned: Double
        public var fixed: Double
        public var oracle: Double

        public var description: String {
            String(
                format: "learned %.4f, fixed %.4f, oracle %.4f (learned/oracle %.3f, learned/fixed %.3f)",
                learned,
                fixed,
                oracle,
                learned / oracle,
                learned / fixed
            )
        }
    }

    public struct Outcome: Sendable, CustomStringConvertible {
        /// Days 1-7 and days 22 to the last.
        public var early: Rates
        public var late: Rates
        public var deliveries: Int
        /// Pushes inside the quiet hours, and on a day the programme leaves out: both must be 0.
        public var quietPushes: Int
        public var excludedDayPushes: Int
        /// Days on which a user had no delivery though the programme had the day (must be 0).
        public var missedDays: Int

        public var description: String {
            "days 1-7 \(early); days 22-: \(late); \(deliveries) deliveries, \(quietPushes) in quiet hours, "
                + "\(excludedDayPushes) on excluded days, \(missedDays) missed"
        }
    }

    /// The daily deliveries the ledger recorded at an instant: id, user and local date (a store-specific query).
    public typealias Recorded = @Sendable (Date) async throws -> [(id: Int64, user: Int64, date: String)]

    public let readers: Int
    public let days: Int
    public let seed: UInt64

    public init(readers: Int, days: Int = 60, seed: UInt64 = 36) {
        self.readers = readers
        self.days = days
        self.seed = seed
    }

    /// The tenant the simulation creates (the recorded deliveries' query names it).
    public static let tenantName = "sim"
    /// Monday 2026-01-05, 00:00 UTC.
    public static let start = Date(timeIntervalSince1970: 1_767_571_200)

    public func run(store: any BrokerStore, recorded: Recorded, logger: Logger) async throws -> Outcome {
        let world = try SimulatedReaders(count: readers, seed: seed)
        let tenantID = try TenantID(Self.tenantName)
        let programme = try Weekdays([1, 2, 3, 4, 5, 6])
        var tenant = try Tenant(
            id: tenantID,
            name: "Simulation",
            defaultTimeZone: "UTC",
            defaultQuietHours: world.quietHours,
            weekdays: programme,
            apnsTopic: "sim"
        )
        tenant.learnedTiming = LearnedTiming(enabled: true, holdoutShare: 0)
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
        var users: [Int64: SimulatedReaders.Reader] = [:]
        for reader in world.readers {
            var new = try NewUser(tenant: tenantID, username: "reader-\(reader.user)", passwordHash: "x")
            new.preferences = DeliveryPreferences(timeZone: "UTC", deliveryTime: reader.stated)
            let user = try await store.createUser(new)
            try await store.setTimingOptIn(tenant: tenantID, user: user.id, optedIn: true, audit: nil)
            users[user.id.rawValue] = reader
        }
        let scheduler = Scheduler(
            store: store,
            ledger: DeliveryLedger(store: store, catalog: CatalogCache(store: store)),
            gateway: nil,
            configuration: SchedulerConfiguration(batchSize: 500, spreadWindow: .zero),
            logger: logger
        )
        let window = tenant.learnedTiming.windowMinutes
        var reads = [[Int]](repeating: [0, 0, 0], count: days)
        var delivered = [Int](repeating: 0, count: days)
        var quiet = 0
        var excluded = 0
        var perUserDays = Set<String>()
        let firstDay = Int(Self.start.timeIntervalSince1970) / 86_400
        for day in 0..<days {
            let date = LocalDate(dayNumber: firstDay + day)
            let kind = DayKind(isoWeekday: date.isoWeekday)
            for step in 0..<48 {
                let now = Self.start.addingTimeInterval(Double(day * 86_400 + step * 1800))
                while try await scheduler.tick(now: now) >= 500 {}
                var marks: [DeliveryMark] = []
                for row in try await recorded(now) {
                    guard let reader = users[row.user], let deliveryDate = try? LocalDate(parsing: row.date) else {
                        continue
                    }
                    let minute = step * 30
                    let pushedDay = deliveryDate.dayNumber - firstDay
                    guard pushedDay >= 0, pushedDay < days else { continue }
                    perUserDays.insert("\(row.user) \(row.date)")
                    if world.quietHours.contains(try LocalTime(minuteOfDay: minute)) { quiet += 1 }
                    if !programme.contains(deliveryDate.isoWeekday) { excluded += 1 }
                    let luck = world.day(reader, pushedDay)
                    delivered[pushedDay] += 1
                    if world.readsWithinHour(reader, at: minute, kind, luck) { reads[pushedDay][0] += 1 }
                    if world.readsWithinHour(reader, at: reader.stated.minuteOfDay, kind, luck) {
                        reads[pushedDay][1] += 1
                    }
                    let best = world.oracle(reader, kind, windowMinutes: window)
                    if world.readsWithinHour(reader, at: best, kind, luck) { reads[pushedDay][2] += 1 }
                    let id = DeliveryID(row.id)
                    marks.append(
                        DeliveryMark(
                            tenant: tenantID,
                            delivery: id,
                            kind: .pushed(apnsID: "sim-\(row.id)", channels: .apns),
                            at: now
                        )
                    )
                    if let read = world.readAt(reader, pushedAt: minute, kind, luck) {
                        let at = Self.start.addingTimeInterval(Double(pushedDay * 86_400 + read.minuteOfDay * 60 + 30))
                        marks.append(DeliveryMark(tenant: tenantID, delivery: id, kind: .read, at: at))
                    }
                }
                if !marks.isEmpty { try await store.applyMarks(marks) }
            }
        }
        let programmeDays = (0..<days).filter {
            programme.contains(LocalDate(dayNumber: firstDay + $0).isoWeekday)
        }
        func rates(_ range: Range<Int>) -> Rates {
            let chosen = range.filter { programmeDays.contains($0) }
            let pushes = Double(chosen.reduce(0) { $0 + delivered[$1] })
            let sums = chosen.reduce(into: [0, 0, 0]) { sums, day in for arm in 0..<3 { sums[arm] += reads[day][arm] } }
            return Rates(
                learned: Double(sums[0]) / pushes,
                fixed: Double(sums[1]) / pushes,
                oracle: Double(sums[2]) / pushes
            )
        }
        return Outcome(
            early: rates(0..<min(7, days)),
            late: rates(min(21, days)..<days),
            deliveries: delivered.reduce(0, +),
            quietPushes: quiet,
            excludedDayPushes: excluded,
            missedDays: programmeDays.count * readers - perUserDays.count
        )
    }
}
