import Foundation
import Simulation
import TestSupport
import Testing

@testable import Engine

/// The learned delivery time's model: a pure value, no store, no clock.
@Suite("Learned delivery time")
struct LearnedTimingTests {
    let tenant = try! TenantID("acme")
    let on = LearnedTiming(enabled: true, holdoutShare: 0)
    let neutral = PopulationPrior(ReadEvidence())

    func time(_ text: String) throws -> LocalTime { try LocalTime(parsing: text) }

    /// Evidence of `days` deliveries a day at each listed time, read or not.
    func evidence(_ pushes: [(String, Bool, Int)], kind: DayKind = .weekday) throws -> ReadEvidence {
        var evidence = ReadEvidence()
        for (text, read, count) in pushes {
            for _ in 0..<count { evidence.observe(TimingSlot(containing: try time(text)), kind, read: read) }
        }
        return evidence
    }

    /// `n` weekdays from Monday 2026-11-23.
    func weekdays(_ n: Int) -> [LocalDate] {
        let monday = try! LocalDate(parsing: "2026-11-23")
        return (0..<(n * 7 / 5 + 7)).map { monday.adding(days: $0) }.filter { $0.isoWeekday <= 5 }.prefix(n).map { $0 }
    }

    @Test("The seeded generator repeats itself and its Beta draws have the Beta's mean")
    func generator() {
        var first = SeededGenerator(seed: 42)
        var second = SeededGenerator(seed: 42)
        #expect((0..<10).map { _ in first.next() } == (0..<10).map { _ in second.next() })
        var generator = SeededGenerator(seed: 7)
        for (alpha, beta) in [(2.0, 6.0), (0.5, 0.5), (30.0, 10.0)] {
            let mean = (0..<20_000).reduce(0.0) { sum, _ in sum + generator.beta(alpha, beta) } / 20_000
            #expect(abs(mean - alpha / (alpha + beta)) < 0.01, "Beta(\(alpha), \(beta)): \(mean)")
        }
    }

    @Test("Off, holdout, the user's own time and a new user keep the stated time, each saying why")
    func guardrails() throws {
        let date = try LocalDate(parsing: "2026-11-24")
        let stated = try time("08:00")
        let learned = try evidence([("07:00", true, 10), ("08:00", false, 10)])
        let user = UserID(1)
        var subject = LearnedTiming.Subject(tenant: tenant, user: user, stated: stated, evidence: learned)
        #expect(LearnedTiming().choose(for: subject, on: date, prior: neutral) == .init(time: stated, reason: .off))
        subject.ownTime = true
        #expect(on.choose(for: subject, on: date, prior: neutral) == .init(time: stated, reason: .ownTime))
        subject.optedIn = true
        #expect(on.choose(for: subject, on: date, prior: neutral).reason == .learned(reads: 10, deliveries: 20))
        subject.evidence = try evidence([("07:00", true, 6)])
        #expect(
            on.choose(for: subject, on: date, prior: neutral)
                == .init(time: stated, reason: .learning(have: 6, need: 7))
        )
        // A tenth of the users, stably, whatever the date.
        let holdout = LearnedTiming(enabled: true)
        let held = (1...10_000).filter { holdout.isHoldout(tenant: tenant, user: UserID(Int64($0))) }
        #expect((900...1100).contains(held.count), "\(held.count)")
        var member = LearnedTiming.Subject(
            tenant: tenant,
            user: UserID(Int64(held[0])),
            stated: stated,
            evidence: learned
        )
        member.optedIn = true
        #expect(holdout.choose(for: member, on: date, prior: neutral) == .init(time: stated, reason: .holdout))
    }

    @Test("Every chosen time is inside the window, within a step of the day before and outside the quiet hours")
    func bounds() throws {
        let stated = try time("07:10")
        let quiet = try QuietHours(parsing: "22:00-07:00")
        // Reads everywhere: the draws spread over every candidate.
        var evidence = ReadEvidence()
        for slot in 0..<TimingSlot.count { evidence.observe(TimingSlot(slot), .weekday, read: slot % 2 == 0) }
        var previous = stated
        var seen = Set<LocalTime>()
        for date in weekdays(200) {
            let subject = LearnedTiming.Subject(
                tenant: tenant,
                user: UserID(3),
                stated: stated,
                previous: previous,
                quietHours: quiet,
                evidence: evidence
            )
            let chosen = on.choose(for: subject, on: date, prior: neutral).time
            #expect(abs(chosen.minuteOfDay - stated.minuteOfDay) <= 180)
            #expect(abs(chosen.minuteOfDay - previous.minuteOfDay) <= 60)
            #expect(!quiet.contains(chosen), "\(chosen)")
            // The same user and day choose the same again (another node, a restart).
            #expect(on.choose(for: subject, on: date, prior: neutral).time == chosen)
            seen.insert(chosen)
            previous = chosen
        }
        // 07:10 itself (its own minute in its own slot), then the half hours up to 10:00.
        let ten = try time("10:00")
        #expect(seen.contains(stated) && seen.contains(ten) && seen.count >= 6, "\(seen.sorted())")
        #expect(seen.allSatisfy { $0 == stated || $0.minuteOfDay % 30 == 0 })
    }

    @Test("A user who reads at 09:30 and not at 08:00 is moved there, a step a day, and kept there")
    func learns() throws {
        let stated = try time("08:00")
        let learned = try evidence([("08:00", false, 8), ("08:30", false, 2), ("09:00", true, 2), ("09:30", true, 4)])
        var previous = stated
        var times: [LocalTime] = []
        for date in weekdays(30) {
            let subject = LearnedTiming.Subject(
                tenant: tenant,
                user: UserID(5),
                stated: stated,
                previous: previous,
                evidence: learned
            )
            previous = on.choose(for: subject, on: date, prior: neutral).time
            times.append(previous)
        }
        let halfPastNine = try time("09:30")
        #expect(times.prefix(3).allSatisfy { $0 <= halfPastNine })
        let settled = times.dropFirst(5)
        let near = settled.filter { abs($0.minuteOfDay - 9 * 60 - 30) <= 30 }
        #expect(near.count >= settled.count * 8 / 10, "\(times)")
    }

    @Test("Weekends are learned apart once there are enough of them; before, weekdays inform them")
    func weekends() throws {
        let stated = try time("08:00")
        var both = try evidence([("07:00", true, 12), ("10:00", false, 12)])
        let saturday = try LocalDate(parsing: "2026-11-28")
        let monday = try LocalDate(parsing: "2026-11-30")
        func chosen(_ evidence: ReadEvidence, on date: LocalDate, seed: Int64) -> LocalTime {
            let subject = LearnedTiming.Subject(
                tenant: tenant,
                user: UserID(seed),
                stated: stated,
                previous: try! time(date.isoWeekday >= 6 ? "09:30" : "07:30"),
                evidence: evidence
            )
            return on.choose(for: subject, on: date, prior: neutral).time
        }
        // Few weekend deliveries: a Saturday follows the weekdays (07:00 read, 10:00 not).
        let early = (1...40).map { chosen(both, on: saturday, seed: $0) }
        #expect(early.filter { $0.minuteOfDay <= 9 * 60 }.count >= 30, "\(early)")
        // Ten Saturdays read at 10:00, none at 08:30: Saturdays move late, Mondays stay early.
        for (text, read) in [("10:00", true), ("08:30", false)] {
            for _ in 0..<10 { both.observe(TimingSlot(containing: try time(text)), .weekend, read: read) }
        }
        let late = (1...40).map { chosen(both, on: saturday, seed: $0) }
        #expect(late.filter { $0.minuteOfDay >= 9 * 60 + 30 }.count >= 30, "\(late)")
        let weekday = (1...40).map { chosen(both, on: monday, seed: $0) }
        #expect(weekday.filter { $0.minuteOfDay <= 8 * 60 }.count >= 30, "\(weekday)")
    }

    @Test("The population lowers the prior where its people seldom read; a user's own evidence then outweighs it")
    func population() throws {
        // The tenant's people read at 09:00 and not at 08:00.
        var population = ReadEvidence()
        for _ in 0..<500 {
            population.observe(TimingSlot(containing: try time("09:00")), .weekday, read: true)
            population.observe(TimingSlot(containing: try time("08:00")), .weekday, read: false)
        }
        let prior = PopulationPrior(population)
        func mean(_ evidence: ReadEvidence, _ text: String) throws -> Double {
            let subject = LearnedTiming.Subject(
                tenant: tenant,
                user: UserID(1),
                stated: try time("08:00"),
                evidence: evidence
            )
            let (alpha, beta) = on.posterior(for: subject, kind: .weekday, prior: prior)[
                TimingSlot(containing: try time(text)).index
            ]
            return alpha / (alpha + beta)
        }
        // Little history (one read at 08:30 of four): 08:00 starts below 09:00, whose prior is the user's own level.
        let few = try evidence([("08:30", true, 1), ("08:30", false, 3)])
        let (fewEight, fewNine) = (try mean(few, "08:00"), try mean(few, "09:00"))
        #expect(fewEight < fewNine - 0.1, "\(fewEight) \(fewNine)")
        #expect(abs(fewNine - 0.25) < 0.1, "\(fewNine)")
        // Thirty reads at 08:00 and none at 09:00 outweigh it.
        let many = try evidence([("08:00", true, 30), ("09:00", false, 30)])
        let (manyEight, manyNine) = (try mean(many, "08:00"), try mean(many, "09:00"))
        #expect(manyEight > manyNine + 0.5, "\(manyEight) \(manyNine)")
    }

    @Test("A read hours after its push is a miss where it was pushed and weaker, inferred evidence about the rest")
    func censoredLateRead() throws {
        var evidence = ReadEvidence()
        evidence.observe(pushedAt: try time("08:00"), readAt: try time("12:10"), .weekday)
        let model = LearnedTiming()
        // Seen: a miss at 08:00, nothing else.
        #expect(evidence.misses[0][16] == 1 && evidence.misses.joined().reduce(0, +) == 1)
        #expect(evidence.reads.joined().reduce(0, +) == 0)
        // Inferred: the slots whose whole hour passed unread (08:30 to 11:00) a miss, the two whose hour holds 12:10
        // (11:30 and 12:00) a read, each of the model's weight; nothing before the push or after the read.
        #expect((17...22).allSatisfy { evidence.inferredMisses[0][$0] == model.skippedWeight })
        #expect(
            evidence.inferredReads[0][23] == model.lateReadWeight
                && evidence.inferredReads[0][24] == model.lateReadWeight
        )
        #expect(evidence.inferredReads.joined().reduce(0, +) == 2 * model.lateReadWeight && model.lateReadWeight < 1)
        #expect(evidence.inferredMisses[0][15] == 0 && evidence.inferredMisses[0][25] == 0)
        // What is inferred of a slot counts less as its own pushes come in.
        var tried = evidence
        for _ in 0..<3 { tried.observe(TimingSlot(23), .weekday, read: false) }
        #expect(tried.inferred(.weekday, trust: 1).reads[23] == model.lateReadWeight / 4)
        #expect(tried.inferred(.weekday, trust: 1).reads[24] == model.lateReadWeight)
        // Read within the hour: a read where it was pushed; the next slot, whose hour holds the read, an inferred one.
        var soon = ReadEvidence()
        soon.observe(pushedAt: try time("08:00"), readAt: try time("08:40"), .weekday)
        #expect(
            soon.reads[0][16] == 1 && soon.reads.joined().reduce(0, +) == 1 && soon.misses.joined().reduce(0, +) == 0
        )
        #expect(
            soon.inferredReads[0][17] == model.lateReadWeight
                && soon.inferredReads.joined().reduce(0, +) == model.lateReadWeight
        )
        // Evidence kept before inferred counts existed decodes with none.
        let old = #"{"reads": \#(soon.reads), "misses": \#(soon.misses), "deliveryCounts": [1, 0], "readCount": 1}"#
        let decoded = try JSONDecoder().decode(ReadEvidence.self, from: Data(old.utf8))
        #expect(
            decoded.reads == soon.reads && decoded.inferredReads.joined().reduce(0, +) == 0 && decoded.deliveries() == 1
        )
    }

    @Test("Evidence fades by the days between folds: half after the half-life")
    func fades() throws {
        let zone = TimeZone(identifier: "UTC")!
        let monday = try LocalDate(parsing: "2026-11-23")
        func outcome(_ date: LocalDate) -> TimingOutcome {
            let pushed = Date(timeIntervalSince1970: Double(date.dayNumber * 86_400 + 8 * 3600))
            return TimingOutcome(localDate: date, pushedAt: pushed, readAt: pushed.addingTimeInterval(600))
        }
        let model = LearnedTiming()
        let first = UserTiming().folding([outcome(monday)], before: monday.adding(days: 1), in: zone, model: model)
            .timing
        #expect(first.evidence.reads[0][16] == 1)
        let later = monday.adding(days: Int(model.halfLifeDays))
        let second = first.folding([outcome(later)], before: later.adding(days: 1), in: zone, model: model).timing
        #expect(abs(second.evidence.reads[0][16] - 1.5) < 1e-9, "\(second.evidence.reads[0][16])")
        #expect(second.evidence.deliveries() == 2)
    }

    @Test("A user whose deliveries were never read keeps the stated time, saying why")
    func neverRead() throws {
        let stated = try time("08:00")
        let unread = try evidence([("08:00", false, 20), ("09:00", false, 5)])
        for date in weekdays(20) {
            let subject = LearnedTiming.Subject(tenant: tenant, user: UserID(9), stated: stated, evidence: unread)
            let choice = on.choose(for: subject, on: date, prior: neutral)
            #expect(choice.time == stated && choice.reason == .noReads(deliveries: 25))
        }
    }

    @Test("The population's hours do not pull a user from what their own evidence shows")
    func minority() throws {
        // Nine in ten of the tenant read at 07:00; this user reads at 10:00 and not at 07:00-08:00.
        var population = ReadEvidence()
        for _ in 0..<900 {
            population.observe(TimingSlot(containing: try time("07:00")), .weekday, read: true)
            population.observe(TimingSlot(containing: try time("10:00")), .weekday, read: false)
        }
        let prior = PopulationPrior(population)
        let own = try evidence([("10:00", true, 8), ("07:00", false, 4), ("07:30", false, 2), ("08:00", false, 2)])
        let chosen = weekdays(30).map { date in
            let subject = LearnedTiming.Subject(
                tenant: tenant,
                user: UserID(Int64(date.dayNumber)),
                stated: try! time("08:30"),
                previous: try! time("10:00"),
                evidence: own
            )
            return on.choose(for: subject, on: date, prior: prior).time.minuteOfDay
        }
        #expect(chosen.filter { $0 >= 9 * 60 + 30 }.count >= 24, "\(chosen)")
    }
}
