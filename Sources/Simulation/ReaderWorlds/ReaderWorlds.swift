import Engine
import Foundation

/// Simulated reader worlds written apart from the learned delivery time model, to judge it on readers it was not
/// tuned on (issue 45): nine families of realistic, varied populations, each deterministic for its seed.
public enum ReaderWorlds {
    /// The families' names, in the order of ``Family``.
    public static let families: [String] = Family.allCases.map(\.rawValue)

    /// A world of `readers` readers of a family.
    /// - Throws: `EngineError` (`invalid-input`) for an unknown family, naming the known ones.
    public static func make(family: String, seed: UInt64, readers: Int) throws -> any ReaderWorld {
        guard let kind = Family(rawValue: family) else {
            throw EngineError(
                .invalidInput,
                "unknown reader world family '\(family.prefix(64))'; known: \(families.joined(separator: ", "))"
            )
        }
        let population = Population(
            family: family,
            seed: seed,
            count: max(0, readers),
            neverShare: kind.neverShare,
            notOptedInShare: kind.neverShare,
            roles: kind.roles
        )
        let built = try population.build { role, luck in try kind.reader(role: role, luck: &luck) }
        // Mondays; the zones' first 60 days hold the changes of the US (day 20), Europe (41) and Sydney (48).
        let first =
            kind == .zones ? try LocalDate(year: 2026, month: 2, day: 16) : try LocalDate(year: 2026, month: 1, day: 5)
        return FamilyWorld(
            family: family,
            seed: seed,
            start: Date(timeIntervalSince1970: Double(first.dayNumber) * 86_400),
            tenantQuietHours: QuietHours(
                start: try LocalTime(hour: 21, minute: 0),
                end: try LocalTime(hour: 7, minute: 0)
            ),
            tenantWeekdays: try Weekdays(Array(1...6)),
            population: built
        )
    }
}

/// One reader as a family builds them: what the broker sees, and how they read.
struct BuiltReader: Sendable {
    var reader: WorldReader
    var style: ReadingStyle
}

/// A family's population: never-readers and readers who did not opt in by quota, the rest in the family's groups by
/// their shares (largest remainders), all shuffled by the seed; each reader built from their own generator.
struct Population {
    static let never = "never-reads"
    static let notOptedIn = "not-opted-in"

    let family: String
    let seed: UInt64
    let count: Int
    let neverShare: Double
    let notOptedInShare: Double
    let roles: [(name: String, share: Double)]

    func build(_ make: (String, inout SplitMix64) throws -> BuiltReader) rethrows -> [BuiltReader] {
        let familyKey = stableHash("reader-world", family)
        var labels = labels()
        var shuffler = SplitMix64(keys: LuckTag.roles, seed, familyKey)
        shuffler.shuffle(&labels)
        var built: [BuiltReader] = []
        built.reserveCapacity(labels.count)
        for (index, label) in labels.enumerated() {
            var luck = SplitMix64(keys: LuckTag.reader, seed, familyKey, UInt64(index))
            guard label == Self.never || label == Self.notOptedIn else {
                built.append(try make(label, &luck))
                continue
            }
            // They live like anyone in the family; one never reads, the other keeps their stated time.
            var reader = try make(role(&luck), &luck)
            reader.reader.group = label
            if label == Self.never {
                reader.style = .never
                reader.reader.habitMovesOnDay = nil
            } else {
                reader.reader.optedIn = false
            }
            built.append(reader)
        }
        return built
    }

    private func quota(_ share: Double) -> Int { count >= 3 ? max(1, Int((share * Double(count)).rounded())) : 0 }

    private func labels() -> [String] {
        let never = quota(neverShare)
        let notOptedIn = min(quota(notOptedInShare), count - never)
        let rest = count - never - notOptedIn
        let total = roles.reduce(0) { $0 + $1.share }
        let exact = roles.map { $0.share / total * Double(rest) }
        var counts = exact.map { Int($0.rounded(.down)) }
        let byRemainder = exact.indices.sorted { exact[$0] - Double(counts[$0]) > exact[$1] - Double(counts[$1]) }
        for index in byRemainder.prefix(rest - counts.reduce(0, +)) { counts[index] += 1 }
        var labels = Array(repeating: Self.never, count: never) + Array(repeating: Self.notOptedIn, count: notOptedIn)
        for (role, number) in zip(roles, counts) { labels += Array(repeating: role.name, count: number) }
        return labels
    }

    /// A family group by its share, for a reader labelled otherwise.
    private func role(_ luck: inout SplitMix64) -> String {
        let total = roles.reduce(0) { $0 + $1.share }
        var draw = luck.uniform() * total
        for role in roles {
            draw -= role.share
            if draw < 0 { return role.name }
        }
        return roles[roles.count - 1].name
    }
}
