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

    @Test("With little history a user follows the tenant's population; their own evidence then outweighs it")
    func population() throws {
        let stated = try time("08:00")
        var population = ReadEvidence()
        for _ in 0..<500 {
            population.observe(TimingSlot(containing: try time("09:00")), .weekday, read: true)
            population.observe(TimingSlot(containing: try time("08:00")), .weekday, read: false)
        }
        let prior = PopulationPrior(population)
        let date = try LocalDate(parsing: "2026-11-24")
        func share(_ evidence: ReadEvidence, near target: String) -> Int {
            (1...100).filter { n in
                let subject = LearnedTiming.Subject(
                    tenant: tenant,
                    user: UserID(Int64(n)),
                    stated: stated,
                    previous: try! time("08:30"),
                    evidence: evidence
                )
                let chosen = on.choose(for: subject, on: date, prior: prior).time.minuteOfDay
                return abs(chosen - (try! time(target)).minuteOfDay) <= 30
            }.count
        }
        // Seven unread deliveries at 08:30 say little; the population's 09:00 wins most draws.
        let few = try evidence([("08:30", false, 7)])
        #expect(share(few, near: "09:00") >= 60)
        // Thirty reads at 07:30 and none at 09:00 outweigh it.
        let many = try evidence([("07:30", true, 30), ("09:00", false, 30)])
        #expect(share(many, near: "07:30") >= 60)
    }

    /// Read rates per arm over a range of days.
    struct Rates: CustomStringConvertible {
        var learned = 0.0
        var fixed = 0.0
        var oracle = 0.0
        var description: String {
            String(format: "learned %.4f, fixed %.4f, oracle %.4f", learned, fixed, oracle)
        }
    }

    /// The model alone against simulated readers, all three arms on the same readers and the same luck: fixed
    /// (the stated time), an oracle that knows each reader's best slot, and the learned time.
    static func simulate(
        readers: Int,
        days: Int,
        seed: UInt64,
        policy: LearnedTiming = LearnedTiming(enabled: true, holdoutShare: 0)
    ) throws -> (early: Rates, late: Rates, quietPushes: Int) {
        let world = try SimulatedReaders(count: readers, seed: seed)
        let tenant = try TenantID("acme")
        let start = try LocalDate(parsing: "2026-01-05")  // a Monday
        var evidence = [ReadEvidence](repeating: ReadEvidence(), count: world.readers.count)
        // The step is measured from the last delivery of the same day kind.
        var previous = [[LocalTime]](repeating: world.readers.map(\.stated), count: 2)
        var population = ReadEvidence()
        var reads = [[Int]](repeating: [0, 0, 0], count: days)
        var quietPushes = 0
        for day in 0..<days {
            let date = start.adding(days: day)
            let kind = DayKind(isoWeekday: date.isoWeekday)
            let prior = PopulationPrior(population)
            var learnedToday = ReadEvidence()
            for (index, reader) in world.readers.enumerated() {
                let luck = world.day(reader, day)
                func read(_ minute: Int) -> Bool { world.readsWithinHour(reader, at: minute, kind, luck) }
                let subject = LearnedTiming.Subject(
                    tenant: tenant,
                    user: reader.user,
                    stated: reader.stated,
                    previous: previous[kind.rawValue][index],
                    quietHours: world.quietHours,
                    evidence: evidence[index]
                )
                let chosen = policy.choose(for: subject, on: date, prior: prior).time
                if world.quietHours.contains(chosen) { quietPushes += 1 }
                let learned = read(chosen.minuteOfDay)
                if learned { reads[day][0] += 1 }
                if read(reader.stated.minuteOfDay) { reads[day][1] += 1 }
                if read(world.oracle(reader, kind, windowMinutes: policy.windowMinutes)) { reads[day][2] += 1 }
                let readAt = world.readAt(reader, pushedAt: chosen.minuteOfDay, kind, luck)
                evidence[index].observe(pushedAt: chosen, readAt: readAt, kind)
                learnedToday.observe(pushedAt: chosen, readAt: readAt, kind)
                previous[kind.rawValue][index] = chosen
            }
            population.add(learnedToday)
        }
        func rates(_ range: Range<Int>) -> Rates {
            let pushes = Double(range.count * world.readers.count)
            let sums = range.reduce(into: [0, 0, 0]) { sums, day in for arm in 0..<3 { sums[arm] += reads[day][arm] } }
            return Rates(
                learned: Double(sums[0]) / pushes,
                fixed: Double(sums[1]) / pushes,
                oracle: Double(sums[2]) / pushes
            )
        }
        return (rates(0..<min(7, days)), rates(min(21, days)..<days), quietPushes)
    }

    @Test(
        "Simulated readers, the model alone: days 22-60 at least 90% of the oracle and 15% above fixed times, days 1-7 at least 98% of fixed, none in quiet hours"
    )
    func simulatedReaders() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["TIMING_SEED"] ?? "") ?? 36
        let readers = Int(ProcessInfo.processInfo.environment["TIMING_READERS"] ?? "") ?? 1000
        let (early, late, quiet) = try Self.simulate(readers: readers, days: 60, seed: seed)
        print("learned timing, model alone, \(readers) readers, seed \(seed): days 1-7 \(early); days 22-60 \(late)")
        #expect(late.learned >= 0.9 * late.oracle, "\(late)")
        #expect(late.learned >= 1.15 * late.fixed, "\(late)")
        #expect(early.learned >= 0.98 * early.fixed, "\(early)")
        #expect(quiet == 0)
    }
}
