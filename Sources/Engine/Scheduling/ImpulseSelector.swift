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

    public func choose(
        from catalog: CatalogIndex,
        tenant: Tenant,
        user: UserID,
        language: String?,
        scores: LifeAreaScores,
        date: LocalDate,
        history: SelectionHistory
    ) -> Impulse? {
        let language = language.flatMap { catalog.has(language: $0) ? $0 : nil } ?? tenant.defaultLanguage
        let seed = "\(tenant.id.rawValue)|\(user)|\(date)"
        let series = catalog.series[language] ?? [:]
        for name in series.keys.sorted() {
            guard let done = history.seriesProgress[name], done > 0 else { continue }
            if let step = series[name]?.first(where: { ($0.seriesPosition ?? 0) > done }) { return step }
        }
        let singles = catalog.singles[language] ?? [:]
        let starts = series.filter { history.seriesProgress[$0.key] == nil }.compactMap(\.value.first)
        let areas = LifeArea.allCases.enumerated().sorted {
            (scores[$0.element], $0.offset) < (scores[$1.element], $1.offset)
        }
        for (_, area) in areas {
            let candidates =
                (singles[area] ?? []).filter { history.recent[$0.id] == nil } + starts.filter { $0.lifeArea == area }
            if let pick = candidates.min(by: { rank($0, seed) < rank($1, seed) }) { return pick }
        }
        return singles.values.joined().min {
            let left = history.recent[$0.id] ?? .distantPast
            let right = history.recent[$1.id] ?? .distantPast
            return left != right ? left < right : rank($0, seed) < rank($1, seed)
        }
    }

    private func rank(_ impulse: Impulse, _ seed: String) -> UInt64 {
        stableHash(seed, impulse.id.rawValue)
    }
}
