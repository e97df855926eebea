/// The due rows this node has claimed and not yet committed, with when each claim ends: the node counts them itself
/// (for `/inspect` and `/metrics`), because an index on the claim's columns would keep every claim from being
/// written in place.
struct HeldClaims: Sendable {
    /// User id of each claimed row, and the claim's end in Unix seconds.
    private var ends: [Int64: Double] = [:]

    /// Rows claimed until `until`.
    mutating func claimed(_ users: some Sequence<Int64>, until: Double) {
        for user in users { ends[user] = until }
    }

    /// Rows committed: their claims are released.
    mutating func released(_ users: some Sequence<Int64>) {
        for user in users { ends[user] = nil }
    }

    /// Claims that have not ended at `now`; those that have are forgotten (the rows are free for any node).
    mutating func count(at now: Double) -> Int {
        ends = ends.filter { $0.value >= now }
        return ends.count
    }
}
