import Engine
import Foundation

extension LearnedTiming {
    /// The model's constants from `name=value,...` over the defaults, for trying them in the simulation (a
    /// tenant's store keeps only the settings an operator sets): window, step, minimum, apart, prior, exploration,
    /// smoothing, late, skipped, halfLife, trust.
    public init(constants text: String) throws {
        self.init(enabled: true, holdoutShare: 0)
        for pair in text.split(separator: ",") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = Double(parts[1]) else {
                throw EngineError(.invalidInput, "model constants: '\(pair)' is not name=number")
            }
            switch parts[0] {
            case "window": windowMinutes = Int(value)
            case "step": maximumStepMinutes = Int(value)
            case "minimum": minimumDeliveries = Int(value)
            case "apart": separateKindsAfter = Int(value)
            case "prior": priorWeight = value
            case "exploration": exploration = value
            case "smoothing": smoothingMinutes = value
            case "late": lateReadWeight = value
            case "skipped": skippedWeight = value
            case "halfLife": halfLifeDays = value
            case "trust": inferredTrust = value
            default:
                throw EngineError(
                    .invalidInput,
                    "model constants: unknown '\(parts[0])' (window, step, minimum, apart, prior, exploration, "
                        + "smoothing, late, skipped, halfLife, trust)"
                )
            }
        }
    }
}
