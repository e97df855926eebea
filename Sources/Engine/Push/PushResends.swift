import Foundation

/// The pushes of one batch that the outcome policy sends again, each with the attempt it will be and when it is
/// due. The gateway's one resend loop sends every due push together, waits on its clock for the next, and leaves
/// those still waiting unsettled when it stops. Pure: the loop does the sending and the waiting.
struct PushResends {
    struct Resend: Equatable {
        /// The push's position in its batch.
        var position: Int
        /// The attempt it will be (2 for the first resend).
        var attempt: Int
        var due: Date
    }

    private(set) var waiting: [Resend] = []

    var isEmpty: Bool { waiting.isEmpty }

    /// When the next resend is due (nil: none waits).
    var nextDue: Date? { waiting.lazy.map(\.due).min() }

    /// Sends the push at `position` again, as attempt `attempt`, `delay` after `now`.
    mutating func schedule(_ position: Int, attempt: Int, after delay: Duration, from now: Date) {
        waiting.append(Resend(position: position, attempt: attempt, due: now.addingTimeInterval(max(delay.seconds, 0))))
    }

    /// The resends due by `now`, in batch order, taken out.
    mutating func takeDue(at now: Date) -> [Resend] {
        let due = waiting.filter { $0.due <= now }
        waiting.removeAll { $0.due <= now }
        return due.sorted { $0.position < $1.position }
    }

    /// Every waiting resend, taken out unsent (the gateway stops).
    mutating func takeAll() -> [Resend] {
        defer { waiting.removeAll() }
        return waiting.sorted { $0.position < $1.position }
    }
}

/// What a batch's answers have settled so far, by job: the first accepted id and the channels that accepted, and
/// the jobs left unsettled (deferred, stopped, or waiting for a resend when the gateway stopped).
struct BatchTally {
    var accepted: [String?]
    var channels: [PushChannels]
    var unsettled: Set<Int> = []
    /// By push (position in the batch): whether it has its outcome (accepted, or refused for good). A push
    /// deferred, waiting for a resend, or put back with its paused tenant has none.
    var done: [Bool]
    /// Jobs with a push deferred (its channel kept failing).
    var deferred: Set<Int> = []

    init(jobs: Int, pushes: Int) {
        accepted = [String?](repeating: nil, count: jobs)
        channels = [PushChannels](repeating: [], count: jobs)
        done = [Bool](repeating: false, count: pushes)
    }
}

/// Deliveries a device of which is still waiting because its channel kept failing, each with its next try: the
/// gateway pushes them again itself (to the waiting devices alone) 10 s after the deferral, then after 20 s and
/// 40 s; a delivery still waiting after that is left to the scheduler's sweep (every minute) and the next start.
/// So a channel that recovers gets its deferred pushes within seconds, not at the next sweep. Bounded: beyond
/// `capacity` deliveries the rest are left to the sweep. Pure: the gateway does the pushing and the waiting.
struct DeferredPushes {
    /// The pauses before the first, second and third retry.
    static let pauses: [TimeInterval] = [10, 20, 40]
    let capacity: Int
    private(set) var waiting: [DeliveryID: (due: Date, delivery: Delivery)] = [:]
    /// Retries made per delivery still waiting or retried (forgotten once past the last pause).
    private var rounds: [DeliveryID: Int] = [:]

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    var count: Int { waiting.count }
    var nextDue: Date? { waiting.values.lazy.map(\.due).min() }

    /// Adds deliveries just deferred; returns how many were left to the sweep (past the last pause, or no room).
    mutating func add(_ deliveries: [Delivery], at now: Date) -> Int {
        var left = 0
        for delivery in deliveries {
            let round = rounds[delivery.id] ?? 0
            guard round < Self.pauses.count, waiting.count < capacity || waiting[delivery.id] != nil else {
                rounds[delivery.id] = nil
                left += 1
                continue
            }
            rounds[delivery.id] = round + 1
            waiting[delivery.id] = (now.addingTimeInterval(Self.pauses[round]), delivery)
        }
        return left
    }

    /// Forgets every waiting delivery (the node hands its work to others); returns how many.
    mutating func dropAll() -> Int {
        defer { (waiting, rounds) = ([:], [:]) }
        return waiting.count
    }

    /// The deliveries due by `now`, taken out (oldest first).
    mutating func takeDue(at now: Date) -> [Delivery] {
        let due = waiting.filter { $0.value.due <= now }.sorted { $0.key < $1.key }
        for (id, _) in due { waiting[id] = nil }
        // The rounds of deliveries no longer waiting stay until they settle or run out of pauses; keep the table
        // bounded by what waits.
        if rounds.count > 2 * capacity { rounds = rounds.filter { waiting[$0.key] != nil } }
        return due.map(\.value.delivery)
    }
}
