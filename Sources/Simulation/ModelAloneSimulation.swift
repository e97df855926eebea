import Engine
import Foundation

/// The learned-time model asked directly, day by day, in a ``ReaderWorld``: no scheduler, no store, so that many
/// worlds and seeds run in seconds (for choosing the model's constants). It plans as the scheduler does: a day's time
/// is chosen when the delivery before it fires, from the evidence of the days before that one, with the tenant's
/// population as it stood then. The real path (``TimingSimulation``) is what the targets are judged on.
public struct ModelAloneSimulation: Sendable {
    public let model: LearnedTiming
    public let days: Int

    /// `holdoutShare`: the users kept on fixed times (0: none; the report's truth test gives it a share).
    public init(model: LearnedTiming, days: Int = 60, holdoutShare: Double = 0) {
        var model = model
        model.enabled = true
        model.holdoutShare = holdoutShare
        self.model = model
        self.days = days
    }

    public func run(_ world: any ReaderWorld) throws -> WorldScore {
        let tenant = try TenantID("sim")
        let firstDay = Int(world.start.timeIntervalSince1970) / 86_400
        let readers = world.readers.indices.map { ScoredReader($0, world, window: model.windowMinutes) }
        var states = [UserTiming](repeating: UserTiming(), count: readers.count)
        var outcomes = [[TimingOutcome]](repeating: [], count: readers.count)
        var planned = [SendTimeChoice?](repeating: nil, count: readers.count)
        var population = ReadEvidence()
        var score = WorldScore(family: world.family, seed: world.seed)
        var rows: [RowKey: RowCounts] = [:]
        for day in 0..<days {
            let date = LocalDate(dayNumber: firstDay + day)
            let prior = PopulationPrior(population, smoothingMinutes: model.smoothingMinutes)
            var added = ReadEvidence()
            for scored in readers where scored.programme.contains(date.isoWeekday) {
                let index = scored.index
                states[index].optedIn = scored.reader.optedIn
                let subject = subject(scored, states[index], tenant)
                let holdout = model.isHoldout(tenant: tenant, user: subject.user)
                let choice = planned[index] ?? model.choose(for: subject, on: date, prior: prior)
                states[index] = states[index].planning(date, choice)
                guard let pushedAt = scored.instant(date, choice.time) else {
                    score.missedDays += 1
                    continue
                }
                score.score(
                    world,
                    scored,
                    day: day,
                    date: date,
                    pushedAt: pushedAt,
                    neverReads: scored.reader.group == "never-reads",
                    learnedArm: !holdout
                )
                outcomes[index].append(
                    TimingOutcome(
                        localDate: date,
                        pushedAt: pushedAt,
                        readAt: world.readTime(reader: index, pushedAt: pushedAt)
                    )
                )
                // The next day is planned now, from the days before this one.
                let folded = states[index].folding(
                    outcomes[index],
                    before: date,
                    in: scored.zone,
                    holdout: holdout,
                    eligible: scored.reader.optedIn,
                    model: model
                )
                states[index] = folded.timing
                for count in folded.counts where count.eligible && count.week.dayNumber >= firstDay + 21 {
                    rows[RowKey(user: index, week: count.week), default: RowCounts(holdout: count.holdout)].add(count)
                }
                outcomes[index].removeAll { $0.localDate < date }
                added.add(folded.added)
                if let next = (1...14).lazy.map({ date.adding(days: $0) }).first(where: {
                    scored.programme.contains($0.isoWeekday)
                }) {
                    let choice = model.choose(for: self.subject(scored, states[index], tenant), on: next, prior: prior)
                    states[index] = states[index].planning(next, choice)
                    planned[index] = choice
                }
            }
            population.add(added)
        }
        // Whole weeks only: the last one may be cut short by the end of the run.
        let lastWeek = LocalDate(dayNumber: firstDay + days).adding(days: -7)
        score.comparisonRows = rows.filter { $0.key.week <= lastWeek }.map { key, row in
            TimingUserWeek(
                user: UserID(Int64(key.user + 1)),
                week: key.week,
                holdout: row.holdout,
                deliveries: row.deliveries,
                withinHour: row.withinHour,
                read: row.read
            )
        }
        return score
    }

    struct RowKey: Hashable {
        var user: Int
        var week: LocalDate
    }

    struct RowCounts {
        var holdout: Bool
        var deliveries = 0
        var withinHour = 0
        var read = 0

        mutating func add(_ count: TimingOutcomeCount) {
            deliveries += 1
            if count.withinHour { withinHour += 1 }
            if count.bucket != nil { read += 1 }
        }
    }

    func subject(_ scored: ScoredReader, _ state: UserTiming, _ tenant: TenantID) -> LearnedTiming.Subject {
        var subject = LearnedTiming.Subject(
            tenant: tenant,
            user: UserID(Int64(scored.index + 1)),
            stated: scored.reader.stated,
            ownTime: true,
            optedIn: scored.reader.optedIn,
            quietHours: scored.quietHours,
            evidence: state.evidence
        )
        subject.previous = state.previous
        return subject
    }
}
