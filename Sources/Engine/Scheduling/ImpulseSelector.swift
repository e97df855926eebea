import Foundation

/// A tenant's catalog arranged for selection: stand-alone impulses by language and life area, series steps by
/// language and series in step order.
public struct CatalogIndex: Sendable {
    var singles: [String: [LifeArea: [Impulse]]] = [:]
    var series: [String: [String: [Impulse]]] = [:]
    public let count: Int

    public init(_ impulses: [Impulse]) {
        count = impulses.count
        for impulse in impulses {
            if impulse.single {
                singles[impulse.language, default: [:]][impulse.lifeArea, default: []].append(impulse)
            } else if let name = impulse.series {
                series[impulse.language, default: [:]][name, default: []].append(impulse)
            }
        }
        for (language, byName) in series {
            for (name, steps) in byName {
                series[language]?[name] = steps.sorted {
                    ($0.seriesPosition ?? 0, $0.id.rawValue) < ($1.seriesPosition ?? 0, $1.id.rawValue)
                }
            }
        }
    }

    func has(language: String) -> Bool { singles[language] != nil || series[language] != nil }
}

/// What a user has had recently: the input that keeps selection from repeating itself.
public struct SelectionHistory: Sendable, Equatable {
    /// Impulses delivered within the repeat window, with when they were last delivered.
    public var recent: [ImpulseID: Date]
    /// The highest step delivered per series, ever.
    public var seriesProgress: [String: Int]

    public init(recent: [ImpulseID: Date] = [:], seriesProgress: [String: Int] = [:]) {
        self.recent = recent
        self.seriesProgress = seriesProgress
    }
}

/// Chooses a user's impulse for a day. Pure and deterministic for a given user, day, catalog and history.
///
/// 1. The language is the user's if the catalog has any impulse in it, else the tenant's default.
/// 2. A started series continues: its next step in that language, one step per day, until finished.
/// 3. Otherwise the weakest life area (lowest score; ties in the fixed area order) that has an eligible impulse
///    wins: a stand-alone impulse not delivered within the repeat window, or the first step of a series not yet
///    started. Within the area the tie-break is a stable hash of tenant, user, day and impulse id.
/// 4. When everything was delivered recently, the stand-alone impulse delivered longest ago is repeated.
public struct ImpulseSelector: Sendable {
    public init() {}

    private static let lifeAreas = LifeArea.allCases

    public func choose(
        from catalog: CatalogIndex,
        tenant: Tenant,
        user: UserID,
        language: String?,
        scores: LifeAreaScores,
        date: LocalDate,
        history: SelectionHistory
    ) -> Impulse? {
        // This runs once per due user: candidates are ranked where they lie (no filtered copies of impulses),
        // each rank is hashed once, and the seed's part of the hash is computed once.
        let language = language.flatMap { catalog.has(language: $0) ? $0 : nil } ?? tenant.defaultLanguage
        var seed = StableHasher()
        seed.combine("\(tenant.id.rawValue)|\(user)|\(date)")
        let series = catalog.series[language] ?? [:]
        if !history.seriesProgress.isEmpty {
            for name in series.keys.sorted() {
                guard let done = history.seriesProgress[name], done > 0 else { continue }
                if let step = series[name]?.first(where: { ($0.seriesPosition ?? 0) > done }) { return step }
            }
        }
        let singles = catalog.singles[language] ?? [:]
        let starts = series.filter { history.seriesProgress[$0.key] == nil }.compactMap(\.value.first)
        // Weakest area first; ties in the fixed area order.
        let values = scores.values
        let order = Self.lifeAreas.indices.sorted { (values[$0], $0) < (values[$1], $1) }
        for index in order {
            let area = Self.lifeAreas[index]
            // The first candidate of lowest rank, singles before series starts (as `min(by:)` over both).
            var best: (impulse: Impulse, rank: UInt64)?
            if let list = singles[area] {
                for position in list.indices where history.recent[list[position].id] == nil {
                    let rank = rank(list[position].id, seed)
                    if best == nil || rank < best!.rank { best = (list[position], rank) }
                }
            }
            for position in starts.indices where starts[position].lifeArea == area {
                let rank = rank(starts[position].id, seed)
                if best == nil || rank < best!.rank { best = (starts[position], rank) }
            }
            if let best { return best.impulse }
        }
        return singles.values.joined().min {
            let left = history.recent[$0.id] ?? .distantPast
            let right = history.recent[$1.id] ?? .distantPast
            return left != right ? left < right : rank($0.id, seed) < rank($1.id, seed)
        }
    }

    /// `stableHash(seed text, impulse id)`, continued from the seed's state.
    private func rank(_ impulse: ImpulseID, _ seed: StableHasher) -> UInt64 {
        var hasher = seed
        hasher.combine(impulse.rawValue)
        return hasher.value
    }
}
