import NIOCore
import Synchronization

/// Under pressure every HTTP/2 connection of the REST listener is asked for fewer concurrent streams.
///
/// A refusal (503, 429) still costs its TLS, HTTP/2 and HPACK work, nearly half of what a cheap request costs
/// (BENCHMARKS.md, round 15): at twice the capacity, refusing the excess leaves little for the admitted. So when
/// admission control is full, each connection gets `SETTINGS_MAX_CONCURRENT_STREAMS` of `throttled`, and clients
/// keep their further requests until streams free up (nghttp2 refuses streams beyond it with REFUSED_STREAM,
/// which a client may retry); back at half the bound, `normal` again. New connections start at the current limit.
final class StreamGovernor: Sendable {
    let normal: UInt32
    let throttled: UInt32
    private let state: Mutex<(limit: UInt32, connections: [ObjectIdentifier: NIOLoopBound<HTTP2ConnectionHandler>])>

    init(normal: UInt32, throttled: UInt32) {
        self.normal = normal
        self.throttled = min(normal, max(1, throttled))
        state = Mutex((limit: normal, connections: [:]))
    }

    /// The limit connections are told now.
    var currentLimit: UInt32 { state.withLock { $0.limit } }

    /// Adds a connection; returns the limit to announce to it now (its SETTINGS start at `normal`).
    func register(_ handler: NIOLoopBound<HTTP2ConnectionHandler>, id: ObjectIdentifier) -> UInt32 {
        state.withLock {
            $0.connections[id] = handler
            return $0.limit
        }
    }

    func unregister(_ id: ObjectIdentifier) {
        _ = state.withLock { $0.connections.removeValue(forKey: id) }
    }

    func pressure(_ pressed: Bool) {
        let limit = pressed ? throttled : normal
        let connections = state.withLock { state -> [NIOLoopBound<HTTP2ConnectionHandler>] in
            guard state.limit != limit else { return [] }
            state.limit = limit
            return Array(state.connections.values)
        }
        guard !connections.isEmpty else { return }
        for handler in connections {
            handler.eventLoop.execute { handler.value.announce(maxConcurrentStreams: limit) }
        }
    }
}
