import Foundation
import Testing

@testable import Engine

@Suite("Impulse selection")
struct ImpulseSelectorTests {
    let tenant: Tenant
    let selector = ImpulseSelector()

    init() throws {
        tenant = try Tenant(id: TenantID("acme"), name: "Acme", defaultLanguage: "EN")
    }

    func impulse(
        _ id: String,
        _ area: LifeArea,
        language: String = "EN",
        series: String? = nil,
        step: Int? = nil
    ) throws -> Impulse {
        try Impulse(
            tenant: tenant.id,
            id: ImpulseID(id),
            language: language,
            title: id,
            descriptionShort: "",
            description: "",
            durationMinutes: 5,
            action: .do,
            single: series == nil,
            imageURLs: [],
            videoURL: nil,
            webURL: nil,
            lifeArea: area,
            series: series,
            seriesPosition: step
        )
    }

    func scores(_ weak: [LifeArea: Int]) throws -> LifeAreaScores {
        try LifeAreaScores(LifeArea.allCases.map { weak[$0] ?? 50 })
    }

    func choose(
        _ catalog: [Impulse],
        language: String? = "EN",
        scores: LifeAreaScores = .neutral,
        date: String = "2026-11-23",
        history: SelectionHistory = .init(),
        user: Int64 = 1
    ) throws -> String? {
        selector.choose(
            from: CatalogIndex(catalog),
            tenant: tenant,
            user: UserID(user),
            language: language,
            scores: scores,
            date: try LocalDate(parsing: date),
            history: history
        )?.id.rawValue
    }

    @Test("A started series continues step by step, in order, until finished; it is never restarted")
    func seriesOrder() throws {
        let catalog = [
            try impulse("calm-3", .sleep, series: "calm", step: 3),
            try impulse("calm-1", .sleep, series: "calm", step: 1),
            try impulse("calm-2", .sleep, series: "calm", step: 2), try impulse("walk", .fitness),
        ]
        let weakSleep = try scores([.sleep: 5])
        #expect(try choose(catalog, scores: weakSleep) == "calm-1")
        #expect(try choose(catalog, scores: weakSleep, history: .init(seriesProgress: ["calm": 1])) == "calm-2")
        // Continues even when the weakest area is now another one.
        let weakFitness = try scores([.fitness: 1])
        #expect(try choose(catalog, scores: weakFitness, history: .init(seriesProgress: ["calm": 2])) == "calm-3")
        // Finished: the series is not offered again.
        #expect(try choose(catalog, scores: weakSleep, history: .init(seriesProgress: ["calm": 3])) == "walk")
    }

    @Test("The weakest life area with something to offer wins")
    func lifeAreas() throws {
        let catalog = [try impulse("budget", .finances), try impulse("nap", .sleep), try impulse("call", .friends)]
        #expect(try choose(catalog, scores: try scores([.sleep: 10, .finances: 20])) == "nap")
        #expect(try choose(catalog, scores: try scores([.finances: 10, .sleep: 20])) == "budget")
        // No impulse for the weakest area (health): the next weakest that has one.
        #expect(try choose(catalog, scores: try scores([.health: 0, .friends: 30])) == "call")
    }

    @Test("The user's language, falling back to the tenant's default when the catalog has none in it")
    func languageFallback() throws {
        let catalog = [try impulse("nap-en", .sleep), try impulse("nap-de", .sleep, language: "DE")]
        #expect(try choose(catalog, language: "DE") == "nap-de")
        #expect(try choose(catalog, language: "EN") == "nap-en")
        #expect(try choose(catalog, language: "FR") == "nap-en")
        #expect(try choose(catalog, language: nil) == "nap-en")
    }

    @Test("Nothing repeats within the window; when everything did, the longest-ago impulse comes back")
    func noRepeats() throws {
        let catalog = [try impulse("nap", .sleep), try impulse("tea", .sleep), try impulse("run", .fitness)]
        let weakSleep = try scores([.sleep: 5, .fitness: 40])
        let day = { (n: Double) in Date(timeIntervalSince1970: 1_700_000_000 + n * 86_400) }
        let first = try #require(try choose(catalog, scores: weakSleep))
        let other = first == "nap" ? "tea" : "nap"
        #expect(try choose(catalog, scores: weakSleep, history: .init(recent: [ImpulseID(first): day(1)])) == other)
        let bothSleep = try SelectionHistory(recent: [ImpulseID("nap"): day(1), ImpulseID("tea"): day(2)])
        #expect(try choose(catalog, scores: weakSleep, history: bothSleep) == "run")
        let everything = try SelectionHistory(recent: [
            ImpulseID("nap"): day(2), ImpulseID("tea"): day(1), ImpulseID("run"): day(3),
        ])
        #expect(try choose(catalog, scores: weakSleep, history: everything) == "tea")
        #expect(try choose([], scores: weakSleep) == nil)
    }

    @Test("The choice is deterministic for a user, day and catalog, and varies between users and days")
    func determinism() throws {
        let catalog = try (1...8).map { try impulse("nap-\($0)", .sleep) }
        let weakSleep = try scores([.sleep: 5])
        let once = try choose(catalog, scores: weakSleep, date: "2026-11-23")
        for _ in 0..<5 { #expect(try choose(catalog.reversed(), scores: weakSleep, date: "2026-11-23") == once) }
        let days = try (1...28).map { try choose(catalog, scores: weakSleep, date: String(format: "2026-02-%02d", $0)) }
        #expect(Set(days).count >= 4)
        let users = try (1...20).map { try choose(catalog, scores: weakSleep, user: Int64($0)) }
        #expect(Set(users).count >= 4)
    }

    @Test("Selection agrees with its plain definition on generated catalogs, scores and histories")
    func agreesWithDefinition() throws {
        // The definition as first written (filtered candidate lists, `min(by:)`, the seed hashed with each id);
        // `choose` ranks in place and hashes the seed once, and must pick the same impulse every time.
        func definition(
            _ catalog: CatalogIndex,
            user: UserID,
            language: String?,
            scores: LifeAreaScores,
            date: LocalDate,
            history: SelectionHistory
        ) -> Impulse? {
            let language = language.flatMap { catalog.has(language: $0) ? $0 : nil } ?? tenant.defaultLanguage
            let seed = "\(tenant.id.rawValue)|\(user)|\(date)"
            func rank(_ impulse: Impulse) -> UInt64 { stableHash(seed, impulse.id.rawValue) }
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
                    (singles[area] ?? []).filter { history.recent[$0.id] == nil }
                    + starts.filter { $0.lifeArea == area }
                if let pick = candidates.min(by: { rank($0) < rank($1) }) { return pick }
            }
            return singles.values.joined().min {
                let left = history.recent[$0.id] ?? .distantPast
                let right = history.recent[$1.id] ?? .distantPast
                return left != right ? left < right : rank($0) < rank($1)
            }
        }
        var random = SplitMix(seed: 42)
        let areas = LifeArea.allCases
        var compared = 0
        var distinct = Set<String>()
        for _ in 0..<300 {
            var impulses: [Impulse] = []
            for n in 0..<random.next(below: 30) {
                let language = random.next(below: 4) == 0 ? "DE" : "EN"
                let area = areas[random.next(below: areas.count)]
                if random.next(below: 3) == 0 {
                    let name = "s\(random.next(below: 3))"
                    impulses.append(
                        try impulse(
                            "\(name)-\(n)",
                            area,
                            language: language,
                            series: name,
                            step: 1 + random.next(below: 4)
                        )
                    )
                } else {
                    impulses.append(try impulse("i\(n)", area, language: language))
                }
            }
            let catalog = CatalogIndex(impulses)
            for _ in 0..<10 {
                // Few distinct scores, so that ties between areas are common.
                let scores = try LifeAreaScores(areas.map { _ in 10 * random.next(below: 4) })
                var recent: [ImpulseID: Date] = [:]
                for impulse in impulses where random.next(below: 2) == 0 {
                    recent[impulse.id] = Date(
                        timeIntervalSince1970: Double(1_700_000_000 + random.next(below: 5) * 86_400)
                    )
                }
                var progress: [String: Int] = [:]
                for name in ["s0", "s1", "s2"] where random.next(below: 3) == 0 {
                    progress[name] = random.next(below: 5)
                }
                let history = SelectionHistory(recent: recent, seriesProgress: progress)
                let user = UserID(Int64(random.next(below: 1000)))
                let language = ["EN", "DE", "FR", nil][random.next(below: 4)]
                let date = LocalDate(dayNumber: 20_000 + random.next(below: 400))
                let chosen = selector.choose(
                    from: catalog,
                    tenant: tenant,
                    user: user,
                    language: language,
                    scores: scores,
                    date: date,
                    history: history
                )
                let defined = definition(
                    catalog,
                    user: user,
                    language: language,
                    scores: scores,
                    date: date,
                    history: history
                )
                #expect(chosen?.id == defined?.id)
                compared += 1
                if let id = chosen?.id.rawValue { distinct.insert(id) }
            }
        }
        #expect(compared == 3000)
        // The generator reaches singles and series steps of many kinds, not one answer.
        #expect(distinct.count > 40)
    }
}

/// A small deterministic generator (SplitMix64): the same cases in every run.
struct SplitMix {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(below bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(bound))
    }
}
