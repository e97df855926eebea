import Synchronization

/// The pushed marks a batch recorded as their answers came: the first accepted device of each job claims it.
final class EarlyMarks: Sendable {
    private let state = Mutex<(jobs: Set<Int>, byDelivery: [DeliveryID: String])>(([], [:]))

    /// Whether this acceptance is the job's first (then the caller records it, under this apns-id).
    func claim(_ job: Int, delivery: DeliveryID, _ apnsID: String) -> Bool {
        state.withLock { state in
            guard state.jobs.insert(job).inserted else { return false }
            state.byDelivery[delivery] = apnsID
            return true
        }
    }

    /// The apns-id each claimed delivery was recorded under.
    var byDelivery: [DeliveryID: String] { state.withLock { $0.byDelivery } }
}
