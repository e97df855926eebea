import Foundation

/// A habitual reading moment around `center` (seconds after local midnight), normally spread by `spread` seconds.
struct ReadingHabit: Sendable, Equatable {
    enum Count: Sendable, Equatable {
        /// Once on a day with this chance (a commute, a coffee).
        case once(chance: Double)
        /// A Poisson number of moments (glances at the phone around a loose habit).
        case cluster(mean: Double)
    }

    var center: Double
    var spread: Double
    var count: Count
}

/// Moments at random through waking hours, `perHour` on average: a look at the phone that opens a waiting push.
struct Glances: Sendable, Equatable {
    var from: Double
    var to: Double
    var perHour: Double
}

/// How a reader reads on one kind of day: the moments at which they would open a waiting push, drawn from the
/// day's luck. `chanceOfNone` is the exact chance, over that luck, of no moment in a stretch of the day; the
/// day's shift and strength are drawn from short lists with equal chances so that the chance is a finite sum.
struct DayProfile: Sendable, Equatable {
    var habits: [ReadingHabit]
    var glances: Glances?
    /// The day's shift of every habit (seconds), one drawn per day.
    var shifts: [Double] = [0]
    /// The day's multiplier of the habits' chances and means, one drawn per day.
    var strengths: [Double] = [1]
    /// The chance of a day without reading at all (ill, travelling, too busy).
    var offDay: Double = 0

    /// The day's moments, in seconds after local midnight, ascending; moments falling outside the day are dropped.
    func moments(_ luck: inout SplitMix64) -> [Double] {
        let off = luck.chance(offDay)
        let shift = luck.pick(shifts)
        let strength = luck.pick(strengths)
        var moments: [Double] = []
        for habit in habits {
            switch habit.count {
            case .once(let chance):
                let happens = luck.chance(min(1, chance * strength))
                let moment = habit.center + shift + habit.spread * luck.normal()
                if happens { moments.append(moment) }
            case .cluster(let mean):
                for _ in 0..<luck.poisson(mean * strength) {
                    moments.append(habit.center + shift + habit.spread * luck.normal())
                }
            }
        }
        if let glances {
            let count = luck.poisson(glances.perHour * (glances.to - glances.from) / 3600)
            for _ in 0..<count { moments.append(glances.from + (glances.to - glances.from) * luck.uniform()) }
        }
        if off { return [] }
        return moments.filter { $0 >= 0 && $0 < 86_400 }.sorted()
    }

    /// The chance of no moment between `start` and `end` (seconds after midnight, within the day).
    func chanceOfNone(from start: Double, to end: Double) -> Double {
        guard end > start else { return 1 }
        var noGlance = 1.0
        if let glances {
            let overlap = max(0, min(end, glances.to) - max(start, glances.from))
            noGlance = exp(-glances.perHour * overlap / 3600)
        }
        var sum = 0.0
        var inside = [Double](repeating: 0, count: habits.count)
        for shift in shifts {
            for (index, habit) in habits.enumerated() {
                let center = habit.center + shift
                inside[index] =
                    normalBelow((end - center) / habit.spread) - normalBelow((start - center) / habit.spread)
            }
            for strength in strengths {
                var none = 1.0
                var mean = 0.0
                for (index, habit) in habits.enumerated() {
                    switch habit.count {
                    case .once(let chance): none *= 1 - min(1, chance * strength) * inside[index]
                    case .cluster(let clusterMean): mean += clusterMean * strength * inside[index]
                    }
                }
                sum += none * exp(-mean)
            }
        }
        let reading = sum / Double(shifts.count * strengths.count) * noGlance
        return offDay + (1 - offDay) * reading
    }

    /// The chance of a moment within the hour from `start`, as long as that hour is inside the day.
    func chanceWithinHour(from start: Double) -> Double { 1 - chanceOfNone(from: start, to: start + 3600) }

    /// The same profile with its first habit moved and loosened (a weekend's, a new job's).
    func withMainHabit(
        at center: Double,
        spreadBy spreadFactor: Double = 1,
        chanceBy chanceFactor: Double = 1
    )
        -> DayProfile
    {
        var profile = self
        guard var main = habits.first else { return profile }
        main.center = center
        main.spread *= spreadFactor
        switch main.count {
        case .once(let chance): main.count = .once(chance: min(1, chance * chanceFactor))
        case .cluster(let mean): main.count = .cluster(mean: mean * chanceFactor)
        }
        profile.habits[0] = main
        return profile
    }
}

/// The standard normal distribution function.
func normalBelow(_ x: Double) -> Double { 0.5 * erfc(-x / 2.0.squareRoot()) }
