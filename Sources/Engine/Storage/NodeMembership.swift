import Foundation

/// The nodes sharing a store, each keeping its claims and leases alive by a heartbeat: a node that goes silent
/// loses them within seconds, not when they run out.
public protocol NodeMembership: Sendable {
    /// This node's id in the store (its claims and leases carry it).
    var nodeID: String { get }
    /// How often to call ``heartbeat(host:now:)``.
    var heartbeatInterval: Duration { get }
    /// Records that this node is alive at `now`; then ends the claims and leases of every node last seen more than
    /// the store's node silence before `now`, and forgets those nodes. Returns what was ended and the nodes left.
    func heartbeat(host: String, now: Date) async throws -> Heartbeat
    /// Ends one node's claims and leases at once and forgets it: this node's previous incarnation at start, or
    /// this node at the end of a graceful stop.
    func endNode(_ id: String) async throws -> EndedNode
    /// The nodes that keep a heartbeat, and when each was last seen.
    func nodes() async throws -> [NodeRecord]
}

/// What a heartbeat found: the silent nodes it ended, and the nodes still keeping a heartbeat (this one
/// included), each as `id@start`: a node that restarted, or handed its work back (``ScheduleStore/handBackWork()``)
/// and came back, appears anew, so that the others sweep for what it left.
public struct Heartbeat: Sendable, Equatable {
    public var ended: [EndedNode]
    public var live: Set<String>

    public init(ended: [EndedNode], live: Set<String>) {
        self.ended = ended
        self.live = live
    }
}

/// A node whose claims and leases were ended, and how many of each.
public struct EndedNode: Sendable, Equatable {
    public var id: String
    public var claims: Int
    public var leases: Int

    public init(id: String, claims: Int, leases: Int) {
        self.id = id
        self.claims = claims
        self.leases = leases
    }
}

/// A node as the store knows it.
public struct NodeRecord: Sendable, Equatable {
    public var id: String
    public var host: String
    public var startedAt: Date
    public var lastSeenAt: Date

    public init(id: String, host: String, startedAt: Date, lastSeenAt: Date) {
        self.id = id
        self.host = host
        self.startedAt = startedAt
        self.lastSeenAt = lastSeenAt
    }
}
