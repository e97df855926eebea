import Foundation
import Simulation
import TestSupport
import Testing

@testable import Engine

/// The learned-time model asked directly in every reader world on a held-out seed (issue 45): the constants were
/// chosen on seeds 1-3 of some families (BENCHMARKS.md); these seeds were not looked at. The holdout report's
/// estimate is checked against the simulation's truth in each. The real path's numbers are broker-bench's.
@Suite("Learned delivery time in reader worlds it was not tuned on", .serialized)
struct LearnedTimingWorldsTests {
    static let environment = ProcessInfo.processInfo.environment
    static let families =
        environment["TIMING_FAMILIES"].map { $0.split(separator: ",").map(String.init) }
        ?? ["original"] + ReaderWorlds.families
    static let seed = UInt64(environment["TIMING_SEED"] ?? "") ?? 104
    static let readers = Int(environment["TIMING_READERS"] ?? "") ?? 400
    static let model = (try? LearnedTiming(constants: environment["TIMING_MODEL"] ?? "")) ?? LearnedTiming()

    static func world(_ family: String, readers: Int) throws -> any ReaderWorld {
        family == "original"
            ? try OriginalReaderWorld(count: readers, seed: seed)
            : try ReaderWorlds.make(family: family, seed: seed, readers: readers)
    }

    /// What the model holds in every world (issue 45's targets are broker-bench's, through the real scheduler;
    /// BENCHMARKS.md says which it meets): no more than 5% below fixed times on days 22-60, where the worst world
    /// (late reads at random moments) is 2.4% below; days 1-7 as fixed times; never-readers on their time; a moved
    /// habit found again; the guardrails.
    @Test(
        "Within 5% of fixed times or above; days 1-7 as fixed; never-readers stay; the guardrails hold",
        arguments: families
    )
    func targets(_ family: String) async throws {
        // Minutes of arithmetic on a thread of its own: on Swift's cooperative pool (two threads here) it would hold
        // one of them throughout, and with another such test beside it, stall every other test in the process.
        let score = try await offThePool {
            try ModelAloneSimulation(model: Self.model).run(try Self.world(family, readers: Self.readers))
        }
        print(score)
        #expect(score.late.learnedAgainstFixed >= 0.95, "\(score)")
        #expect(score.late.learnedAgainstOracle >= 0.55, "\(score)")
        #expect(score.early.learnedAgainstFixed >= 0.98, "\(score)")
        #expect(score.neverReadersNearStated >= 0.95, "\(score)")
        if score.afterMove.pushes > 0 { #expect(score.afterMove.learnedAgainstFixed >= 2, "\(score)") }
        #expect(score.guardrailViolations == 0, "\(score)")
    }

    /// The report's learned-minus-holdout share read within the hour against the truth it estimates (the learned
    /// arm's own counterfactual: the same people on the same days at their stated time). A 95% interval misses the
    /// truth once in twenty; over ten worlds, one miss is allowed, and the sign must be right wherever the report
    /// calls the difference significant or the truth is larger than the interval's half width.
    ///
    /// Seed 104's bimodal world is the one miss (+7.0 pp reported, +1.3 pp true): its arms differ by chance, the
    /// learned arm 73% morning readers, the holdout 60% (3.2 standard deviations of a fair split; morning readers
    /// read within the hour about eight times as often as evening ones here). Seeds 1-3 of the same world hold (+1.7
    /// against +2.7, +1.9 against +2.3, -0.8 against +1.7; BENCHMARKS.md round 26).
    @Test(
        "The holdout report's interval holds the truth in all worlds but at most one, its sign right where it is clear"
    )
    func reportTellsTheTruth() async throws {
        var misses: [String] = []
        for family in Self.families {
            // Half the users in the holdout, so that both arms are large (off the cooperative pool, as above).
            let score = try await offThePool {
                try ModelAloneSimulation(model: Self.model, holdoutShare: 0.5).run(
                    try Self.world(family, readers: Self.readers * 3 / 2)
                )
            }
            let report = TimingArmComparison(score.comparisonRows)
            let estimate = try #require(report.withinHour)
            let truth = score.truth.rate(score.truth.learned) - score.truth.rate(score.truth.fixed)
            print("\(family): report \(estimate.points), truth \(String(format: "%+.1f pp", truth * 100))")
            // The report compares the learned arm with other people: a little room for the arms' different people.
            let slack = (estimate.high - estimate.low) * 0.25
            if !(estimate.low - slack <= truth && truth <= estimate.high + slack) {
                misses.append("\(family): \(estimate.points) against \(String(format: "%+.1f pp", truth * 100))")
            }
            if estimate.significant {
                #expect((estimate.estimate > 0) == (truth > 0), "\(family) \(estimate) \(truth)")
            }
            if abs(truth) > (estimate.high - estimate.low) / 2 {
                #expect((estimate.estimate > 0) == (truth > 0), "\(family) \(estimate) \(truth)")
            }
        }
        #expect(misses.count <= 1, "the interval missed the truth in \(misses)")
    }
}
