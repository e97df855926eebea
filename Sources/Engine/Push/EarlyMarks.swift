import Synchronization

/// The pushed marks a batch recorded as their answers came. A job is claimed when every one of its devices in the
/// batch has accepted its push, under the first accepted push's id: a delivery marked pushed is not pushed again
/// after a crash, so it must not be marked while one of its user's devices (an Android phone beside an iPhone)
/// still waits for its answer or a retry. A job with a device not accepted at once is recorded when the batch is
/// settled, after its retries.
final class EarlyMarks: Sendable {
    /// The batch's pushes per job.
    private let devices: [Int]
    private let state = Mutex<
        (jobs: Set<Int>, accepted: [Int: (indexes: Set<Int>, first: String)], byDelivery: [DeliveryID: String])
    >(
        ([], [:], [:])
    )

    init(devices: [Int]) {
        self.devices = devices
    }

    /// An accepted push (`index` in the batch) of `job`: the id to record the job's delivery under when this
    /// acceptance completes the job (every device accepted), else nil. A push reported twice counts once.
    func claim(_ job: Int, index: Int, delivery: DeliveryID, _ apnsID: String) -> String? {
        state.withLock { state in
            guard !state.jobs.contains(job) else { return nil }
            var recorded = apnsID
            if devices[job] > 1 {
                var accepted = state.accepted[job] ?? ([], apnsID)
                accepted.indexes.insert(index)
                state.accepted[job] = accepted
                guard accepted.indexes.count == devices[job] else { return nil }
                recorded = accepted.first
            }
            state.jobs.insert(job)
            state.byDelivery[delivery] = recorded
            return recorded
        }
    }

    /// The apns-id each claimed delivery was recorded under.
    var byDelivery: [DeliveryID: String] { state.withLock { $0.byDelivery } }
}
