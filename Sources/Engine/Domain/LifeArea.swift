/// The twelve life areas of the screening questionnaire. Impulses address one area; users have a score for each.
public enum LifeArea: String, CaseIterable, Sendable, Codable {
    case work, career, finances, health, fitness, nutrition, sleep, family, partnership, friends, leisure, mindfulness
}

/// A user's scores over the twelve life areas, 0 (weakest) to 100 (strongest).
public struct LifeAreaScores: Sendable, Equatable, Codable {
    public private(set) var values: [Int]

    public static let neutral = LifeAreaScores(uncheckedValues: Array(repeating: 50, count: LifeArea.allCases.count))

    public init(_ values: [Int]) throws(EngineError) {
        guard values.count == LifeArea.allCases.count, values.allSatisfy({ (0...100).contains($0) }) else {
            throw EngineError(.invalidInput, "life area scores must be 12 integers from 0 to 100")
        }
        self.values = values
    }

    init(uncheckedValues: [Int]) { self.values = uncheckedValues }

    public subscript(area: LifeArea) -> Int {
        values[LifeArea.allCases.firstIndex(of: area) ?? 0]
    }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.singleValueContainer().decode([Int].self)
        self = try LifeAreaScores(values)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(values)
    }
}
