import Foundation

/// A tenant's learned delivery time: off unless the tenant turns it on. Each user's daily impulse then moves,
/// within `windowMinutes` of their stated delivery time, toward the half hour they read in, as their deliveries'
/// push-to-read delays show; `holdoutShare` of the users keep fixed times, so that the effect can be measured.
public struct LearnedTiming: Sendable, Equatable, Codable {
    public var enabled: Bool
    /// How far from the stated time the impulse may move, either way (default 3 hours).
    public var windowMinutes: Int
    /// The share of users who keep fixed times (default 10%): the holdout the engagement report compares with.
    public var holdoutShare: Double
    /// How far the time may move from one day to the next (default 1 hour).
    public var maximumStepMinutes: Int
    /// Deliveries a user needs before their time moves (a new user keeps the stated time until then).
    public var minimumDeliveries: Int
    /// Deliveries of one day kind before weekdays and weekends are learned apart.
    public var separateKindsAfter: Int
    /// How many deliveries the prior weighs in a slot's estimate. Its level is the user's own read rate, lowered
    /// where the tenant's people seldom read and never raised above it: it shares where people do not read
    /// without pulling a user toward the majority's hours.
    public var priorWeight: Double
    /// How much the draws explore: each slot's Beta is drawn with its prior and evidence divided by this (1: plain
    /// Thompson sampling; below 1, a tempered posterior, whose draws still narrow as evidence grows). Chosen in the
    /// simulation (BENCHMARKS.md, round 25): plain Thompson sampling explored away more reads than it found in 60
    /// days (0.71 of the oracle in the session world against 0.84 at 0.05).
    public var exploration: Double
    /// How far a delivery's evidence reaches into neighbouring half hours (a Gaussian's sigma, in minutes).
    public var smoothingMinutes: Double
    /// What a read later than the push's hour adds as a read in the slot whose hour ends at it (the reader came
    /// back then; it is weaker evidence than a push read in its hour).
    public var lateReadWeight: Double
    /// What a slot whose hour passed, after the push and before the read, gets as a miss.
    public var skippedWeight: Double
    /// After how many days a delivery's evidence counts half (a habit that moved is found again).
    public var halfLifeDays: Double
    /// How many pushes of a slot's own halve what is inferred of it from pushes elsewhere.
    public var inferredTrust: Double
    /// Set when the safety valve turned learning off for the tenant (every user keeps their stated time).
    public var fallback: LearnedTimingFallback?
    /// The first week the safety valve judges (learning was turned back on; nil: any).
    public var watchFrom: LocalDate?

    public init(
        enabled: Bool = false,
        windowMinutes: Int = 180,
        holdoutShare: Double = 0.10,
        maximumStepMinutes: Int = 60,
        minimumDeliveries: Int = 7,
        separateKindsAfter: Int = 4,
        priorWeight: Double = 2,
        exploration: Double = 0.05,
        smoothingMinutes: Double = 30,
        lateReadWeight: Double = 0.5,
        skippedWeight: Double = 0.5,
        halfLifeDays: Double = 21,
        inferredTrust: Double = 1
    ) {
        self.enabled = enabled
        self.windowMinutes = windowMinutes
        self.holdoutShare = holdoutShare
        self.maximumStepMinutes = maximumStepMinutes
        self.minimumDeliveries = minimumDeliveries
        self.separateKindsAfter = separateKindsAfter
        self.priorWeight = priorWeight
        self.exploration = exploration
        self.smoothingMinutes = smoothingMinutes
        self.lateReadWeight = lateReadWeight
        self.skippedWeight = skippedWeight
        self.halfLifeDays = halfLifeDays
        self.inferredTrust = inferredTrust
    }

    /// What an operator sets (the admin API, the CLI, the console); the rest are the model's constants.
    public struct Settings: Sendable, Equatable, Codable {
        public var enabled: Bool
        public var windowMinutes: Int
        public var holdoutShare: Double
        /// Set by the safety valve; cleared when an admin turns learning back on.
        public var fallback: LearnedTimingFallback?
        public var watchFrom: LocalDate?
    }

    public var settings: Settings {
        Settings(
            enabled: enabled,
            windowMinutes: windowMinutes,
            holdoutShare: holdoutShare,
            fallback: fallback,
            watchFrom: watchFrom
        )
    }

    public init(settings: Settings) {
        self.init(enabled: settings.enabled, windowMinutes: settings.windowMinutes, holdoutShare: settings.holdoutShare)
        fallback = settings.fallback
        watchFrom = settings.watchFrom
    }

    /// Whether users' times are learned now: enabled, and not fallen back.
    public var learning: Bool { enabled && fallback == nil }

    /// The window an operator may set: half an hour to six hours either way.
    public static let windowRange = 30...360
    /// The holdout share an operator may set: none to half the users.
    public static let holdoutRange = 0.0...0.5

    /// Whether a user is in the holdout: a stable draw from the tenant and user, the same on every node.
    public func isHoldout(tenant: TenantID, user: UserID) -> Bool {
        guard holdoutShare > 0 else { return false }
        return Double(stableHash("timing-holdout", tenant.rawValue, user.description) % 1_000_000) / 1_000_000
            < holdoutShare
    }
}

/// What a tenant's users read, per day kind and slot, as the prior mean of each user's estimate.
public struct PopulationPrior: Sendable, Equatable {
    /// `[kind][slot]`: the read-within-the-hour rate.
    public let rates: [[Double]]
    /// The rate over every slot and kind.
    public let overall: Double

    /// From the tenant's users' evidence summed, smoothed as a user's is; a slot without evidence gets the
    /// population's overall rate (a tenant without any, 0.5: nothing is known).
    public init(_ population: ReadEvidence, smoothingMinutes: Double = LearnedTiming().smoothingMinutes) {
        let overall: Double = {
            let reads = ReadEvidence.total(population.reads)
            let all = reads + ReadEvidence.total(population.misses)
            return all > 0 ? reads / all : 0.5
        }()
        self.overall = overall
        rates = DayKind.allCases.map { kind in
            let (reads, misses) = population.counts(kind)
            // Smoothed over neighbouring slots, and pulled toward the overall rate by a few deliveries' weight.
            let kernel = Self.kernel(sigmaMinutes: smoothingMinutes)
            let smoothedReads = Self.smooth(reads, kernel: kernel)
            let smoothedMisses = Self.smooth(misses, kernel: kernel)
            return (0..<TimingSlot.count).map { slot in
                (smoothedReads[slot] + 2 * overall) / (smoothedReads[slot] + smoothedMisses[slot] + 2)
            }
        }
    }

    /// Neighbouring half hours share what they show (reading habits are smooth over the day): a Gaussian's weights
    /// over half hours, 1 at the centre, out to three sigmas.
    static func kernel(sigmaMinutes: Double) -> [Double] {
        let sigma = max(sigmaMinutes / 30, 0.01)
        let radius = Int((3 * sigma).rounded(.down))
        return (-radius...radius).map { exp(-Double($0 * $0) / (2 * sigma * sigma)) }
    }

    /// Plain index loops: the model runs for every learning user of a batch, and the simulations run it millions of
    /// times in debug builds, where sequence adaptors (`enumerated`, `zip`, `joined`) cost several times the sums.
    static func smooth(_ values: [Double], kernel: [Double]) -> [Double] {
        let half = kernel.count / 2
        var result = [Double](repeating: 0, count: values.count)
        for slot in 0..<values.count {
            var sum = 0.0
            for offset in 0..<kernel.count {
                let other = slot + offset - half
                if other >= 0, other < values.count { sum += kernel[offset] * values[other] }
            }
            result[slot] = sum
        }
        return result
    }
}

/// Why a day's delivery time is what it is: shown on the user's page and in their export.
public enum TimingReason: Sendable, Equatable {
    /// Learned timing is off for the tenant.
    case off
    /// The user is in the holdout: fixed times.
    case holdout
    /// The user set their delivery time themselves and did not opt in.
    case ownTime
    /// Too few deliveries yet (`have` of `need`).
    case learning(have: Int, need: Int)
    /// The safety valve turned learning off for the tenant (its holdout showed it worse).
    case fallback
    /// Enough deliveries, none of them read (lately): nothing to move toward.
    case noReads(deliveries: Int)
    /// Learned from `reads` reads of `deliveries` deliveries.
    case learned(reads: Int, deliveries: Int)
}

/// The delivery time for one user and day. Pure: the scheduler asks it and stays the only one who plans.
public struct SendTimeChoice: Sendable, Equatable {
    public var time: LocalTime
    public var reason: TimingReason
}

extension LearnedTiming {
    /// What the scheduler needs to know of a user to choose their day's time.
    public struct Subject: Sendable, Equatable {
        public var tenant: TenantID
        public var user: UserID
        /// The time the user asked for, or the tenant's default.
        public var stated: LocalTime
        /// Whether the user set it themselves (it is kept unless they opted in).
        public var ownTime: Bool
        public var optedIn: Bool
        /// The time of their last delivery, per day kind (the step limit is measured from the one of the day's kind);
        /// nil: the stated time.
        public var previous: [LocalTime?]
        public var quietHours: QuietHours?
        public var evidence: ReadEvidence

        public init(
            tenant: TenantID,
            user: UserID,
            stated: LocalTime,
            ownTime: Bool = false,
            optedIn: Bool = false,
            previous: LocalTime? = nil,
            quietHours: QuietHours? = nil,
            evidence: ReadEvidence = ReadEvidence()
        ) {
            self.tenant = tenant
            self.user = user
            self.stated = stated
            self.ownTime = ownTime
            self.optedIn = optedIn
            self.previous = [previous, previous]
            self.quietHours = quietHours
            self.evidence = evidence
        }
    }

    /// The day's delivery time: the stated time unless learning applies. Otherwise a Thompson draw picks the target
    /// among the half hours inside the window and outside the quiet hours (each slot's read rate drawn from its
    /// Beta posterior: the prior, shaped as the population reads at the user's own level, and the user's faded,
    /// smoothed evidence), and the time moves toward it by at most the step from the day before. A user whose
    /// evidence holds no read keeps the stated time: there is nothing to move toward. The draw is seeded by the
    /// tenant, user and date: choosing again (another node, a restart) chooses the same.
    public func choose(for subject: Subject, on date: LocalDate, prior: PopulationPrior) -> SendTimeChoice {
        guard enabled else { return SendTimeChoice(time: subject.stated, reason: .off) }
        if fallback != nil { return SendTimeChoice(time: subject.stated, reason: .fallback) }
        if isHoldout(tenant: subject.tenant, user: subject.user) {
            return SendTimeChoice(time: subject.stated, reason: .holdout)
        }
        if subject.ownTime && !subject.optedIn { return SendTimeChoice(time: subject.stated, reason: .ownTime) }
        let deliveries = subject.evidence.deliveries()
        guard deliveries >= minimumDeliveries else {
            return SendTimeChoice(time: subject.stated, reason: .learning(have: deliveries, need: minimumDeliveries))
        }
        guard subject.evidence.totalReads > 0, subject.evidence.readWeight > 0.05 else {
            return SendTimeChoice(time: subject.stated, reason: .noReads(deliveries: deliveries))
        }
        let candidates = candidates(for: subject)
        guard !candidates.isEmpty else {
            return SendTimeChoice(time: subject.stated, reason: .learning(have: deliveries, need: minimumDeliveries))
        }
        let kind = DayKind(isoWeekday: date.isoWeekday)
        let posterior = posterior(for: subject, kind: kind, prior: prior)
        var generator = SeededGenerator(
            seed: stableHash("timing", subject.tenant.rawValue, subject.user.description, date.description)
        )
        var target = candidates[0]
        var best = -1.0
        for candidate in candidates {
            let (alpha, beta) = posterior[candidate.slot.index]
            let draw = generator.beta(alpha / exploration + 0.01, beta / exploration + 0.01)
            if draw > best { (target, best) = (candidate, draw) }
        }
        // At most a step from the day before: the candidate within it that is nearest the target.
        let previous = (subject.previous[kind.rawValue] ?? subject.stated).minuteOfDay
        let reachable = candidates.filter { abs($0.minute - previous) <= maximumStepMinutes }
        let chosen =
            reachable.min { abs($0.minute - target.minute) < abs($1.minute - target.minute) }
            ?? candidates.min { abs($0.minute - previous) < abs($1.minute - previous) }!
        return SendTimeChoice(
            time: LocalTime(clampedMinuteOfDay: chosen.minute),
            reason: .learned(reads: subject.evidence.totalReads, deliveries: deliveries)
        )
    }

    /// Each slot's Beta posterior `(alpha, beta)` for a day of `kind`: the user's evidence (of that kind alone once
    /// it has enough of its own; until then both kinds inform each other), smoothed over neighbouring half hours,
    /// added to the prior's `priorWeight` deliveries at the population's shape and the user's own level.
    public func posterior(for subject: Subject, kind: DayKind, prior: PopulationPrior) -> [(Double, Double)] {
        let apart = subject.evidence.deliveries(kind) >= separateKindsAfter
        let (seenReads, seenMisses) = subject.evidence.counts(apart ? kind : nil)
        let inferred = subject.evidence.inferred(apart ? kind : nil, trust: inferredTrust)
        var reads = seenReads
        var misses = seenMisses
        for slot in 0..<TimingSlot.count {
            reads[slot] += inferred.reads[slot]
            misses[slot] += inferred.misses[slot]
        }
        let kernel = PopulationPrior.kernel(sigmaMinutes: smoothingMinutes)
        let smoothedReads = PopulationPrior.smooth(reads, kernel: kernel)
        let smoothedMisses = PopulationPrior.smooth(misses, kernel: kernel)
        // The user's level: their reads among all their evidence, pulled toward the population's by one delivery.
        let readSum = ReadEvidence.sum(reads)
        let own = (readSum + prior.overall) / (readSum + ReadEvidence.sum(misses) + 1)
        let rates = prior.rates[kind.rawValue]
        return (0..<TimingSlot.count).map { slot in
            // The population may lower a slot's prior below the user's own level (few people read then), never
            // raise it above: a slot the majority favours does not outbid what the user's own reads show.
            let shape = min(1, rates[slot] / max(prior.overall, 0.01))
            let mean = min(0.95, max(0.02, own * shape))
            return (
                priorWeight * mean + smoothedReads[slot],
                priorWeight * (1 - mean) + smoothedMisses[slot]
            )
        }
    }

    /// The times a day's delivery may take: each half hour's start (the stated minute in the stated time's own
    /// half hour, so a stated 07:10 stays 07:10) within the window of the stated time, on the same local day, and
    /// not in the quiet hours (they always win).
    func candidates(for subject: Subject) -> [(slot: TimingSlot, minute: Int)] {
        let stated = subject.stated.minuteOfDay
        let statedSlot = TimingSlot(containing: subject.stated)
        return (0..<TimingSlot.count).map(TimingSlot.init).compactMap { slot in
            let minute = slot == statedSlot ? stated : slot.start.minuteOfDay
            guard abs(minute - stated) <= windowMinutes,
                !(subject.quietHours?.contains(LocalTime(clampedMinuteOfDay: minute)) ?? false)
            else { return nil }
            return (slot, minute)
        }
    }
}
