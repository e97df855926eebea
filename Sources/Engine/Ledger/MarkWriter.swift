/// Group commit for delivery marks: callers that arrive while a transaction is running share the next one.
///
/// Each caller suspends until the transaction holding its marks has committed, so a mark is durable when
/// `write` returns, yet a burst of concurrent requests costs a few transactions instead of one each.
/// Every pending entry is a suspended caller (a request in flight), so the queue is bounded by the
/// server's admission limits, not by this type.
actor MarkWriter {
    private let store: any BrokerStore
    private let maximumBatch: Int
    private let metrics: BrokerMetrics
    private var pending: [(marks: [DeliveryMark], continuation: CheckedContinuation<Void, any Error>)] = []
    private var flushing = false

    init(store: any BrokerStore, maximumBatch: Int = 2048, metrics: BrokerMetrics = .disabled) {
        self.store = store
        self.maximumBatch = maximumBatch
        self.metrics = metrics
    }

    func write(_ marks: [DeliveryMark]) async throws {
        guard !marks.isEmpty else { return }
        try await withCheckedThrowingContinuation { continuation in
            pending.append((marks, continuation))
            if !flushing {
                flushing = true
                // The flush task is owned by this actor: exactly one runs while `flushing` is set.
                Task { await self.flush() }
            }
        }
    }

    /// Writes batches until nothing is pending. Runs as the one flushing task; `flushing` guards re-entry.
    private func flush() async {
        while !pending.isEmpty {
            var batch: [(marks: [DeliveryMark], continuation: CheckedContinuation<Void, any Error>)] = []
            var count = 0
            while let next = pending.first, batch.isEmpty || count + next.marks.count <= maximumBatch {
                batch.append(pending.removeFirst())
                count += next.marks.count
            }
            do {
                let marks = batch.flatMap(\.marks)
                try await store.applyMarks(marks)
                for (kind, group) in Dictionary(grouping: marks, by: { $0.kind.metricLabel }) {
                    metrics.ledgerWrites(kind, count: group.count)
                }
                for entry in batch { entry.continuation.resume() }
            } catch {
                for entry in batch { entry.continuation.resume(throwing: error) }
            }
        }
        flushing = false
    }
}

extension DeliveryMark.Kind {
    var metricLabel: String {
        switch self {
        case .fetched: "fetched"
        case .read: "read"
        case .pushed: "pushed"
        case .settled: "settled"
        }
    }
}
