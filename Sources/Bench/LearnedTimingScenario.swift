import Engine
import Foundation
import GRDB
import Logging
import Simulation

/// Learned delivery times judged in reader worlds (issue 45): each family's world for each seed, 60 simulated days,
/// through the real scheduler and ledger on a SQLite store (or, with `modelAlone`, the model asked directly, for
/// trying constants quickly). The result per run: the rates (learned, fixed times, the oracle) over days 1-7 and 22-60,
/// per group, after a habit moved, the never-readers' days near their stated time, and the guardrails' violations.
enum LearnedTimingScenario {
    static func run(
        families: [String],
        readers: Int,
        days: Int,
        seeds: [UInt64],
        model: LearnedTiming,
        modelAlone: Bool,
        work: String
    ) async throws -> [[String: Any]] {
        var logger = Logger(label: "learned-timing")
        logger.logLevel = .error
        var runs: [[String: Any]] = []
        for family in families {
            for seed in seeds {
                let world: any ReaderWorld =
                    family == "original"
                    ? try OriginalReaderWorld(count: readers, seed: seed)
                    : try ReaderWorlds.make(family: family, seed: seed, readers: readers)
                let started = ContinuousClock.now
                let score: WorldScore
                if modelAlone {
                    score = try ModelAloneSimulation(model: model, days: days).run(world)
                } else {
                    score = try await throughScheduler(world, model: model, days: days, work: work, logger: logger)
                }
                let elapsed = started.duration(to: .now)
                FileHandle.standardError.write(Data("\(score)\n".utf8))
                var run = summary(score, readers: readers, days: days, elapsed: elapsed, modelAlone: modelAlone)
                run["fullInformation"] = fullInformation(world, days: days, window: model.windowMinutes)
                runs.append(run)
            }
        }
        return runs
    }

    static func throughScheduler(
        _ world: any ReaderWorld,
        model: LearnedTiming,
        days: Int,
        work: String,
        logger: Logger
    ) async throws -> WorldScore {
        let folder = work + "/\(world.family)-\(world.seed)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/broker.sqlite"
        let store = try await SQLiteStore(configuration: .init(path: path), logger: logger)
        // The deliveries a tick recorded, read beside the store (its file is in WAL mode).
        let reader = try DatabasePool(path: path)
        let score = try await TimingSimulation(world: world, model: model, days: days).run(
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
        await store.close()
        return score
    }

    /// The yardstick beside the learned time (``FullInformationReference``): a learner shown every allowed time's
    /// outcome each day, each variant's days 22 on, and the best variant's in hindsight.
    static func fullInformation(_ world: any ReaderWorld, days: Int, window: Int) -> [String: Any] {
        let results = FullInformationReference(days: days, window: window).run(world)
        guard let best = results.max(by: { $0.late.learned < $1.late.learned }) else { return [:] }
        var lines = ["  full information, best of \(results.count) (\(best.variant)): \(best.late.summary)"]
        for (group, tally) in best.groups.sorted(by: { $0.key < $1.key }) {
            lines.append("    \(group): \(tally.summary)")
        }
        // After a move, the variant best there (fading fast helps there and costs elsewhere).
        let moved = results.max(by: { $0.afterMove.learned < $1.afterMove.learned }) ?? best
        if moved.afterMove.pushes > 0 {
            lines.append("    14 days after a move on, best (\(moved.variant)): \(moved.afterMove.summary)")
        }
        FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        return [
            "best": String(describing: best.variant), "days22on": rates(best.late),
            "groups": best.groups.mapValues(rates), "afterMove": rates(moved.afterMove),
            "afterMoveBest": String(describing: moved.variant),
            "variants": Dictionary(
                uniqueKeysWithValues: results.map { (String(describing: $0.variant), rates($0.late)) }
            ),
        ]
    }

    // JSON has no NaN.
    static func finite(_ value: Double) -> Double { value.isFinite ? value : 0 }

    /// A tally's rates; ratios null where the denominator read nothing (the summary prints "-").
    static func rates(_ tally: WorldScore.Tally) -> [String: Any] {
        func ratio(_ reads: Int, _ others: Int) -> Any { WorldScore.Tally.ratio(reads, others) ?? NSNull() }
        return [
            "learned": finite(tally.rate(tally.learned)), "fixed": finite(tally.rate(tally.fixed)),
            "oracle": finite(tally.rate(tally.oracle)), "pushes": tally.pushes,
            "learnedAgainstOracle": ratio(tally.learned, tally.oracle),
            "learnedAgainstFixed": ratio(tally.learned, tally.fixed),
            "oracleAgainstFixed": ratio(tally.oracle, tally.fixed),
        ]
    }

    static func summary(
        _ score: WorldScore,
        readers: Int,
        days: Int,
        elapsed: Duration,
        modelAlone: Bool
    ) -> [String: Any] {
        var run: [String: Any] = [
            "family": score.family, "seed": Int(score.seed), "readers": readers, "days": days,
            "path": modelAlone ? "model alone" : "scheduler and ledger",
            "days1to7": rates(score.early), "days22on": rates(score.late),
            "groups": score.groups.mapValues(rates), "deliveries": score.deliveries,
            "neverReadersNearStated": finite(score.neverReadersNearStated),
            "pushesInQuietHours": score.quietPushes, "pushesOutsideWindow": score.outsideWindow,
            "pushesOnExcludedDays": score.excludedDayPushes, "missedDays": score.missedDays,
            "seconds": Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
        ]
        if score.afterMove.pushes > 0 { run["afterMove"] = rates(score.afterMove) }
        return run
    }
}
