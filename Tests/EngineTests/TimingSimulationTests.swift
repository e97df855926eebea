import Foundation
import Simulation
import TestSupport
import Testing

@testable import Engine

/// Learned delivery times through the real scheduler and ledger on simulated time (issue 36, item 4): simulated
/// readers over 60 days on SQLite, the scheduler ticked every half hour, pushes and reads recorded in the ledger,
/// the outcomes folded in by the scheduler. BENCHMARKS.md records larger runs (`broker-bench --scenarios
/// learned-timing`).
@Suite("Learned delivery times, simulated through the scheduler and ledger", .timeLimit(.minutes(10)))
struct TimingSimulationTests {
    @Test(
        "Days 22-60 at least 90% of the oracle and 15% above fixed times, days 1-7 at least 98% of fixed; none in quiet hours or on Sundays, none missed"
    )
    func throughTheScheduler() async throws {
        let f = try await StoreFixture.make(.sqlite)
        let readers = Int(ProcessInfo.processInfo.environment["TIMING_READERS"] ?? "") ?? 400
        let seed = UInt64(ProcessInfo.processInfo.environment["TIMING_SEED"] ?? "") ?? 36
        let simulation = TimingSimulation(readers: readers, days: 60, seed: seed)
        let outcome = try await simulation.run(
            store: f.store,
            recorded: { at in
                try await f.texts(
                    """
                    SELECT CAST(id AS TEXT), CAST(user_id AS TEXT), local_date FROM deliveries
                    WHERE tenant_id = 'sim' AND kind = 'scheduled' AND assigned_at = \(at.timeIntervalSince1970)
                    """
                ).map { (Int64($0[0] ?? "") ?? 0, Int64($0[1] ?? "") ?? 0, $0[2] ?? "") }
            },
            logger: StoreFixture.logger
        )
        print("learned timing through the scheduler, \(readers) readers, seed \(seed): \(outcome)")
        #expect(outcome.late.learned >= 0.9 * outcome.late.oracle, "\(outcome)")
        #expect(outcome.late.learned >= 1.15 * outcome.late.fixed, "\(outcome)")
        #expect(outcome.early.learned >= 0.98 * outcome.early.fixed, "\(outcome)")
        #expect(outcome.quietPushes == 0 && outcome.excludedDayPushes == 0 && outcome.missedDays == 0, "\(outcome)")
    }
}
