import Foundation

/// Whether this node's pushes get through, judged from APNs' answers; a node that cannot push hands its work to
/// nodes that can (issue: a node whose every push was refused held the whole backlog while a healthy node idled).
///
/// Failing means answers that say nothing about a device or a payload: no answer at all, 429, 403 (the
/// provider token or certificate) and 5xx. An answer about a device (400, 410) means APNs is reachable and
/// listening. One accepted push makes the node healthy again: a node pushing some tenants but not others keeps
/// its work (the others' pauses are per tenant).
///
/// The cycle: failing with no push accepted for `window` → hand back (once) → hold, taking nothing, for `window`
/// → probe with a small share of the sweep → healthy at the first accepted push, or back to hand back and hold at
/// the first failure.
public struct PushHealth: Sendable, Equatable {
    /// What the node's dispatch does now.
    public enum Mode: Sendable, Equatable {
        /// Dispatch due rows and sweep as usual.
        case pushing
        /// Just gave up: hand back its leases and claims and drop its queue (returned once per give-up).
        case handBack
        /// Take nothing: another node pushes this node's former work.
        case holding
        /// Take at most a small share of the sweep, to learn whether pushes get through again.
        case probing
    }

    /// How long pushes fail with none accepted before the node gives up, and how long it then holds.
    public let window: Duration
    /// The first failure since the last accepted push.
    public private(set) var failingSince: Date?
    /// When the node gave up (holding until `window` after it).
    public private(set) var gaveUpAt: Date?
    public private(set) var probing = false
    private var handedBack = true

    public init(window: Duration) {
        self.window = window
    }

    /// Whether an answer counts against the node (nil: it says nothing either way): the channel taking pushes
    /// clears it; not reaching it, being told to wait and a refused credential count against it; answers about
    /// one device or one payload say nothing of the node.
    public static func failing(_ outcome: PushOutcome) -> Bool? {
        switch outcome {
        case .accepted: false
        case .connectionFailure, .retry, .credentialExpired, .credentialRefused: true
        case .deviceGone, .deviceInvalid, .deviceNotForApp, .payloadRefused: nil
        }
    }

    public static func failing(_ result: PushResult) -> Bool? { failing(PushOutcome(result)) }

    public mutating func observe(_ result: PushResult, at now: Date) {
        switch Self.failing(result) {
        case false?: accepted()
        case true?: failed(at: now)
        case nil: break
        }
    }

    public mutating func accepted() {
        failingSince = nil
        gaveUpAt = nil
        probing = false
    }

    public mutating func failed(at now: Date) {
        if failingSince == nil { failingSince = now }
        if probing {
            // The probe did not get through: give up again at once.
            probing = false
            giveUp(at: now)
        }
    }

    private mutating func giveUp(at now: Date) {
        gaveUpAt = now
        handedBack = false
    }

    /// The mode at `now`, moving on from giving up to holding to probing as time passes.
    public mutating func mode(at now: Date) -> Mode {
        if gaveUpAt == nil, !probing, let since = failingSince, since.distance(to: now) >= window.seconds {
            giveUp(at: now)
        }
        if let gaveUp = gaveUpAt {
            if !handedBack {
                handedBack = true
                return .handBack
            }
            guard gaveUp.distance(to: now) >= window.seconds else { return .holding }
            gaveUpAt = nil
            probing = true
        }
        return probing ? .probing : .pushing
    }
}
