import Engine
import Foundation
import Simulation
import Testing

/// The reader worlds written apart from the learned delivery time model (issue 45), through their public interface.
@Suite("Reader worlds")
struct ReaderWorldTests {
    static let families = ReaderWorlds.families
    static let readerCount = 200

    func world(_ family: String, seed: UInt64 = 11, readers: Int = readerCount) throws -> any ReaderWorld {
        try ReaderWorlds.make(family: family, seed: seed, readers: readers)
    }

    /// `minute` minutes after the midnight (UTC) of day `day`.
    func at(_ world: any ReaderWorld, day: Int, minute: Double) -> Date {
        world.start.addingTimeInterval(Double(day) * 86_400 + minute * 60)
    }

    /// The readers who read and let their time be learned.
    func regular(_ world: any ReaderWorld) -> [Int] {
        world.readers.indices.filter { world.readers[$0].optedIn && world.readers[$0].group != "never-reads" }
    }

    /// The push minute (UTC, every five) with the best chance within the hour on day `day`, and that chance.
    func best(_ world: any ReaderWorld, _ reader: Int, day: Int, from: Int = 0, to: Int = 1440) -> (Int, Double) {
        var best = (from, -1.0)
        for minute in stride(from: from, to: to, by: 5) {
            let chance = world.chanceWithinHour(reader: reader, pushedAt: at(world, day: day, minute: Double(minute)))
            if chance > best.1 { best = (minute, chance) }
        }
        return best
    }

    /// A fixed pseudo-random sequence for push times: the tests' own, apart from the worlds' generator.
    struct Sequence {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    @Test("The nine families by name; an unknown one is refused, naming them")
    func names() throws {
        #expect(
            Self.families == [
                "session", "weekend", "moving", "low-noisy", "edge", "bimodal", "zones", "mixed", "late-random",
            ]
        )
        let error = #expect(throws: EngineError.self) { try ReaderWorlds.make(family: "sleepy", seed: 1, readers: 5) }
        for family in Self.families { #expect(error?.message.contains(family) == true) }
        for family in Self.families { #expect(try world(family, readers: 20).family == family) }
    }

    @Test("The same seed gives the same world; another seed another", arguments: families)
    func determinism(family: String) throws {
        let first = try world(family, seed: 21)
        let again = try world(family, seed: 21)
        let other = try world(family, seed: 22)
        #expect(first.readers == again.readers)
        #expect(first.readers.count == Self.readerCount)
        #expect(first.readers != other.readers)
        #expect(first.seed == 21 && other.seed == 22 && first.start == other.start)
        var differs = false
        for reader in 0..<60 {
            for day in 0..<8 {
                let pushed = at(first, day: day, minute: 420 + Double(reader * 7 % 600))
                let read = first.readTime(reader: reader, pushedAt: pushed)
                #expect(read == again.readTime(reader: reader, pushedAt: pushed))
                let chance = first.chanceWithinHour(reader: reader, pushedAt: pushed)
                #expect(chance == again.chanceWithinHour(reader: reader, pushedAt: pushed))
                if read != other.readTime(reader: reader, pushedAt: pushed)
                    || chance != other.chanceWithinHour(reader: reader, pushedAt: pushed)
                {
                    differs = true
                }
            }
        }
        #expect(differs)
    }

    @Test("Every family has never-readers who never read and readers who did not opt in", arguments: families)
    func neverReadersAndNotOptedIn(family: String) throws {
        let world = try world(family)
        let share = family == "mixed" ? 0.15 : 0.05
        let never = world.readers.indices.filter { world.readers[$0].group == "never-reads" }
        let notOptedIn = world.readers.indices.filter { world.readers[$0].group == "not-opted-in" }
        for group in [never, notOptedIn] {
            #expect(abs(Double(group.count) - share * Double(Self.readerCount)) <= 1)
        }
        for reader in never {
            for day in 0..<40 {
                for minute in [420.0, 600, 1110] {
                    #expect(world.readTime(reader: reader, pushedAt: at(world, day: day, minute: minute)) == nil)
                    #expect(world.chanceWithinHour(reader: reader, pushedAt: at(world, day: day, minute: minute)) == 0)
                }
            }
        }
        #expect(world.readers.allSatisfy { $0.optedIn == ($0.group != "not-opted-in") })
        // They read like anyone else; they only keep their stated time.
        let reads = notOptedIn.flatMap { reader in
            (0..<20).compactMap { world.readTime(reader: reader, pushedAt: at(world, day: $0, minute: 480)) }
        }
        #expect(reads.count > notOptedIn.count * 4)
    }

    @Test("Reads fall at or after the push, within two days", arguments: families)
    func readsNeverBeforePushes(family: String) throws {
        let world = try world(family)
        var sequence = Sequence(state: 7)
        var reads = 0
        for reader in world.readers.indices {
            for day in 0..<30 {
                let pushed = world.start.addingTimeInterval(Double(day * 86_400 + sequence.next(86_400)))
                guard let read = world.readTime(reader: reader, pushedAt: pushed) else { continue }
                reads += 1
                #expect(read >= pushed)
                #expect(read.timeIntervalSince(pushed) <= 48 * 3600)
            }
        }
        #expect(reads > world.readers.count * 30 / 4)
    }

    /// Over 240 days, a reader's reads within the hour of pushes at one time of day are a sum of independent
    /// Bernoulli draws whose chances `chanceWithinHour` claims. The difference from the sum of those chances is
    /// held within 5 standard deviations per reader and time (plus 1.5 reads, for near-certain and near-impossible
    /// reads), and within 4 over the family: with the fixed seeds the test is deterministic, and a correct world
    /// exceeds these with a chance below 1 in 10,000. A chance off by 0.02 over the family fails it.
    @Test("The chance within the hour is the frequency of reads within the hour", arguments: families)
    func chanceMatchesReadTime(family: String) throws {
        let world = try world(family, seed: 5)
        var total = (reads: 0.0, expected: 0.0, variance: 0.0)
        let readers = Array(world.readers.indices.filter { world.readers[$0].group != "never-reads" }.prefix(24))
        // Morning, midday, evening, an odd second, and late enough that the hour crosses midnight.
        for reader in readers {
            for seconds in [27_000.0, 43_200, 70_200, 33_443, 85_200] {
                var cell = (reads: 0.0, expected: 0.0, variance: 0.0)
                for day in 0..<240 {
                    let pushed = world.start.addingTimeInterval(Double(day) * 86_400 + seconds)
                    let chance = world.chanceWithinHour(reader: reader, pushedAt: pushed)
                    #expect((0...1).contains(chance))
                    cell.expected += chance
                    cell.variance += chance * (1 - chance)
                    if let read = world.readTime(reader: reader, pushedAt: pushed),
                        read.timeIntervalSince(pushed) <= 3600
                    {
                        cell.reads += 1
                    }
                }
                #expect(
                    abs(cell.reads - cell.expected) <= 5 * cell.variance.squareRoot() + 1.5,
                    "reader \(reader) at \(seconds) s: \(cell.reads) reads, \(cell.expected) expected"
                )
                total = (total.reads + cell.reads, total.expected + cell.expected, total.variance + cell.variance)
            }
        }
        #expect(abs(total.reads - total.expected) <= 4 * total.variance.squareRoot() + 1)
        #expect(total.reads > 100)
    }

    /// Common random numbers: the day's reading moments are drawn once, so a push that waits past a later push
    /// is read at the same moment as that later push.
    @Test(
        "Two pushes with no reading moment between them are read at the same moment",
        arguments: families.filter { $0 != "late-random" }
    )
    func commonRandomNumbers(family: String) throws {
        let world = try world(family, seed: 3)
        var sequence = Sequence(state: 99)
        var shared = 0
        for reader in regular(world).prefix(80) {
            for day in 0..<40 {
                let first = at(world, day: day, minute: Double(360 + sequence.next(840)) + 0.25)
                let second = first.addingTimeInterval(Double(60 * (10 + sequence.next(230))))
                guard let read = world.readTime(reader: reader, pushedAt: first), read >= second else { continue }
                shared += 1
                #expect(world.readTime(reader: reader, pushedAt: second) == read)
            }
        }
        #expect(shared > 100)
    }

    @Test("Late-random: a push at a likelier time is read within the hour whenever a less likely one is that day")
    func lateRandomCommonRandomNumbers() throws {
        let world = try world("late-random", seed: 3)
        var sequence = Sequence(state: 5)
        var withinLater = 0
        for reader in regular(world) {
            for day in 0..<40 {
                var pushes = [0, 1].map { _ in at(world, day: day, minute: Double(360 + sequence.next(840))) }
                pushes.sort {
                    world.chanceWithinHour(reader: reader, pushedAt: $0)
                        > world.chanceWithinHour(reader: reader, pushedAt: $1)
                }
                func within(_ pushed: Date) -> Bool {
                    world.readTime(reader: reader, pushedAt: pushed).map { $0.timeIntervalSince(pushed) <= 3600 }
                        ?? false
                }
                guard within(pushes[1]) else { continue }
                withinLater += 1
                #expect(within(pushes[0]))
            }
        }
        #expect(withinLater > 100)
    }

    @Test("Stated times are on the half hour, between 06:30 and 10:00 where the family does not need others")
    func statedTimes() throws {
        for family in Self.families {
            for reader in try world(family).readers {
                #expect(reader.stated.minute % 30 == 0)
                if family != "edge" && family != "mixed" {
                    #expect((390...600).contains(reader.stated.minuteOfDay), "\(family): \(reader.stated)")
                }
            }
        }
    }

    @Test("Session: a push is read at the next opening of the app, within two days")
    func sessions() throws {
        let world = try world("session")
        var pushes = 0
        var reads = 0
        for reader in regular(world) {
            for day in 0..<20 {
                let pushed = at(world, day: day, minute: 450)
                pushes += 1
                if let read = world.readTime(reader: reader, pushedAt: pushed) {
                    reads += 1
                    #expect(read.timeIntervalSince(pushed) <= 48 * 3600)
                }
            }
        }
        // Several openings a day: nearly every push is read.
        #expect(Double(reads) > 0.85 * Double(pushes))
        let groups = Set(world.readers.map(\.group))
        #expect(groups.isSuperset(of: ["one-habit", "two-habits", "three-habits"]))
    }
}

extension ReaderWorldTests {
    @Test("Weekend: Saturday's best time differs from Monday's by 1-4 hours, in both directions")
    func weekendHabits() throws {
        let world = try world("weekend")
        var directions = (later: 0, earlier: 0)
        for reader in regular(world) {
            let monday = best(world, reader, day: 0, from: 240, to: 1020).0
            let saturday = best(world, reader, day: 5, from: 240, to: 1020).0
            #expect(best(world, reader, day: 6, from: 240, to: 1020).0 == saturday)
            #expect(best(world, reader, day: 2, from: 240, to: 1020).0 == monday)
            let moved = saturday - monday
            #expect((50...250).contains(abs(moved)), "reader \(reader): \(monday) -> \(saturday)")
            if world.readers[reader].group == "weekend-later" {
                #expect(moved > 0)
                directions.later += 1
            } else {
                #expect(moved < 0)
                directions.earlier += 1
            }
        }
        #expect(min(directions.later, directions.earlier) > regular(world).count / 3)
    }

    @Test("Moving: habits move 1-3 hours earlier or later on their day between 15 and 30, or stay")
    func movingHabits() throws {
        let world = try world("moving")
        var counts: [String: Int] = [:]
        for reader in regular(world) {
            let group = world.readers[reader].group
            counts[group, default: 0] += 1
            guard group != "steady" else {
                #expect(world.readers[reader].habitMovesOnDay == nil)
                let first = best(world, reader, day: 0, from: 240, to: 1020).0
                #expect(first == best(world, reader, day: 45, from: 240, to: 1020).0)
                continue
            }
            let day = try #require(world.readers[reader].habitMovesOnDay)
            #expect((15...30).contains(day))
            let first = best(world, reader, day: 0, from: 240, to: 1020).0
            let before = best(world, reader, day: day - 1, from: 240, to: 1020).0
            let after = best(world, reader, day: day, from: 240, to: 1020).0
            #expect(before == first)
            let moved = after - before
            #expect((50...190).contains(abs(moved)), "reader \(reader) on day \(day): \(before) -> \(after)")
            #expect(group == "moves-later" ? moved > 0 : moved < 0)
        }
        for group in ["moves-earlier", "moves-later", "steady"] {
            #expect(counts[group, default: 0] > regular(world).count / 4)
        }
    }

    @Test("Low-noisy: 15-30% within the hour at the best allowed time, and reads scattered day to day")
    func lowNoisy() throws {
        let world = try world("low-noisy")
        var spreads: [Double] = []
        for reader in regular(world) {
            let (_, chance) = best(world, reader, day: 2, from: 420, to: 1260)
            #expect((0.15...0.30).contains(chance), "reader \(reader): \(chance)")
        }
        for reader in regular(world).prefix(30) {
            let minutes = (0..<300).compactMap { day -> Double? in
                let pushed = at(world, day: day, minute: 420)
                guard let read = world.readTime(reader: reader, pushedAt: pushed) else { return nil }
                let minute = read.timeIntervalSince(at(world, day: day, minute: 0)) / 60
                return minute < 1440 ? minute : nil
            }
            let mean = minutes.reduce(0, +) / Double(minutes.count)
            spreads.append(
                (minutes.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(minutes.count)).squareRoot()
            )
        }
        // The habit's spread (25-50 minutes) and the day's shift (up to ±45) scatter the reads.
        #expect(spreads.reduce(0, +) / Double(spreads.count) > 30)
    }

    @Test("Edge: the best time is beyond ±3 hours of the stated time, or in quiet hours")
    func edge() throws {
        let world = try world("edge")
        for reader in regular(world) {
            let (minute, _) = best(world, reader, day: 1)
            let stated = world.readers[reader].stated.minuteOfDay
            let quiet = world.tenantQuietHours.contains(try LocalTime(minuteOfDay: minute))
            #expect(abs(minute - stated) > 180 || quiet, "reader \(reader): \(minute) stated \(stated)")
        }
        let groups = Set(regular(world).map { world.readers[$0].group })
        #expect(groups == ["beyond-late", "beyond-early", "quiet-evening", "quiet-morning"])
    }

    @Test("Bimodal: two thirds read in the morning, a third in the evening, each on 2-3 days a week")
    func bimodal() throws {
        let world = try world("bimodal", readers: 300)
        for reader in world.readers {
            #expect((2...3).contains(reader.weekdays.days.count))
            #expect(reader.weekdays.days.allSatisfy { (1...6).contains($0) })
        }
        let morning = regular(world).filter { world.readers[$0].group == "morning" }
        let evening = regular(world).filter { world.readers[$0].group == "evening" }
        let share = Double(morning.count) / Double(morning.count + evening.count)
        #expect((0.6...0.73).contains(share))
        for reader in morning { #expect((330..<540).contains(best(world, reader, day: 1).0)) }
        for reader in evening { #expect((1020..<1230).contains(best(world, reader, day: 1).0)) }
    }

    @Test("Zones: six zones, three or more changing offset within 60 days, habits kept in local wall time")
    func zones() throws {
        let world = try world("zones", readers: 240)
        let zones = Set(world.readers.map(\.timeZone))
        #expect(zones.count == 6)
        var changing = 0
        for name in zones {
            let zone = try #require(TimeZone(identifier: name))
            guard let change = zone.nextDaylightSavingTimeTransition(after: world.start),
                change < world.start.addingTimeInterval(60 * 86_400)
            else { continue }
            changing += 1
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            func wall(_ days: Int, _ minute: Int) throws -> Date {
                let day = try #require(calendar.date(byAdding: .day, value: days, to: change))
                let date = calendar.dateComponents([.year, .month, .day], from: day)
                return try #require(
                    calendar.date(
                        from: DateComponents(
                            year: date.year,
                            month: date.month,
                            day: date.day,
                            hour: minute / 60,
                            minute: minute % 60
                        )
                    )
                )
            }
            var utcDiffers = false
            for reader in regular(world) where world.readers[reader].timeZone == name {
                #expect(world.readers[reader].group == name)
                for minute in stride(from: 360, to: 1320, by: 30) {
                    let before = world.chanceWithinHour(reader: reader, pushedAt: try wall(-3, minute))
                    let after = world.chanceWithinHour(reader: reader, pushedAt: try wall(3, minute))
                    #expect(abs(before - after) < 1e-9, "\(name) reader \(reader) at \(minute)")
                    let sameUTC = try wall(-3, minute).addingTimeInterval(6 * 86_400)
                    if abs(world.chanceWithinHour(reader: reader, pushedAt: sameUTC) - before) > 0.01 {
                        utcDiffers = true
                    }
                }
            }
            // At the same UTC time of day the reader's chance is an hour off.
            #expect(utcDiffers, "\(name)")
        }
        #expect(changing >= 3)
    }

    @Test("Mixed: 15% never read, 15% did not opt in, and many have their own quiet hours and weekdays")
    func mixed() throws {
        let world = try world("mixed")
        let count = Double(world.readers.count)
        #expect(Double(world.readers.filter { $0.quietHours != nil }.count) >= 0.25 * count)
        #expect(Double(world.readers.filter { $0.weekdays != .all }.count) >= 0.25 * count)
        #expect(world.readers.contains { $0.quietHours != nil && $0.weekdays != .all })
        #expect(world.readers.contains { $0.quietHours == nil && $0.weekdays == .all && $0.group == "plain" })
        #expect(abs(Double(world.readers.filter { !$0.optedIn }.count) - 0.15 * count) <= 1)
        #expect(abs(Double(world.readers.filter { $0.group == "never-reads" }.count) - 0.15 * count) <= 1)
    }

    @Test("Late-random: a push not read within its hour is read at a uniformly random later time that day")
    func lateRandom() throws {
        let world = try world("late-random")
        var positions: [Double] = []
        for reader in regular(world) {
            let (minute, _) = best(world, reader, day: 0, from: 360, to: 720)
            for day in 0..<200 {
                let pushed = at(world, day: day, minute: Double(minute))
                guard let read = world.readTime(reader: reader, pushedAt: pushed),
                    read.timeIntervalSince(pushed) > 3600
                else { continue }
                // The rest of the push's day after its hour.
                let from = pushed.addingTimeInterval(3600)
                let midnight = at(world, day: day + 1, minute: 0)
                #expect(read > from && read <= midnight)
                positions.append(read.timeIntervalSince(from) / midnight.timeIntervalSince(from))
            }
        }
        #expect(positions.count > 1000)
        // Uniform: a mean of 1/2 and a quarter in each quarter (the standard error is below 0.01).
        let mean = positions.reduce(0, +) / Double(positions.count)
        #expect(abs(mean - 0.5) < 0.03)
        for quarter in 0..<4 {
            let share = Double(positions.filter { Int($0 * 4) == quarter }.count) / Double(positions.count)
            #expect(abs(share - 0.25) < 0.03, "quarter \(quarter): \(share)")
        }
    }
}
