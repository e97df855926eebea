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

    init(jobs: Int) {
        accepted = [String?](repeating: nil, count: jobs)
        channels = [PushChannels](repeating: [], count: jobs)
    }
}
