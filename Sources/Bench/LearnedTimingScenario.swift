import Engine
import Foundation
import GRDB
import Logging
import Simulation

/// Learned delivery times proved through the real scheduler and ledger (issue 36, item 4): ``TimingSimulation``'s
/// readers over 60 simulated days on a SQLite store, once per seed. The result: each seed's rates (learned, fixed
/// times, the oracle) over days 1-7 and 22-60, the targets' ratios, and the pushes that must be none.
enum LearnedTimingScenario {
    static func run(readers: Int, days: Int, seeds: [UInt64], work: String) async throws -> [[String: Any]] {
        var logger = Logger(label: "learned-timing")
        logger.logLevel = .error
        var runs: [[String: Any]] = []
        for seed in seeds {
            let folder = work + "/seed-\(seed)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let path = folder + "/broker.sqlite"
            let store = try await SQLiteStore(configuration: .init(path: path), logger: logger)
            // The deliveries a tick recorded, read beside the store (its file is in WAL mode).
            let reader = try DatabasePool(path: path)
            let started = ContinuousClock.now
            let outcome = try await TimingSimulation(readers: readers, days: days, seed: seed).run(
                store: store,
                recorded: { at in
                    try await reader.read { db in
                        try Row.fetchAll(
                            db,
                            sql: """
                                SELECT id, user_id, local_date FROM deliveries
                                WHERE tenant_id = 'sim' AND kind = 'scheduled' AND assigned_at = ?
                                """,
                            arguments: [at.timeIntervalSince1970]
                        ).map { (id: $0[0], user: $0[1], date: $0[2]) }
                    }
                },
                logger: logger
            )
            let elapsed = started.duration(to: .now)
            await store.close()
            // JSON has no NaN: a range without deliveries (a run shorter than 22 days) gives zeros.
            func rates(_ rates: TimingSimulation.Rates) -> [String: Double] {
                func finite(_ value: Double) -> Double { value.isFinite ? value : 0 }
                return [
                    "learned": finite(rates.learned), "fixed": finite(rates.fixed), "oracle": finite(rates.oracle),
                    "learnedAgainstOracle": finite(rates.learned / rates.oracle),
                    "learnedAgainstFixed": finite(rates.learned / rates.fixed),
                ]
            }
            runs.append([
                "seed": Int(seed), "readers": readers, "days": days, "days1to7": rates(outcome.early),
                "days22on": rates(outcome.late), "deliveries": outcome.deliveries,
                "pushesInQuietHours": outcome.quietPushes, "pushesOnExcludedDays": outcome.excludedDayPushes,
                "missedDays": outcome.missedDays,
                "seconds": Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            ])
        }
        return runs
    }
}
