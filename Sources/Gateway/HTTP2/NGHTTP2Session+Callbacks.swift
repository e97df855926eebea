import CNGHTTP2
import NIOCore

/// The C callbacks: nghttp2 calls them with the session as user data; each hands what it got to the session's
/// handlers (`beginHeaders`, `header`, `data`, `frameReceived`, `frameSent`, `streamClosed`, `readBody`).
extension NGHTTP2Session {
    /// Runs `body` with the session `userData` points to, without retaining it: nghttp2 calls back only from
    /// inside `receive` and `drainOutput`, which the session itself runs, so it is alive throughout. (A retain
    /// and a release per callback, one per header field, were 2.4% of the simulator's time.)
    static func withSession<T>(
        _ userData: UnsafeMutableRawPointer?,
        orElse fallback: T,
        _ body: (NGHTTP2Session) -> T
    ) -> T {
        guard let userData else { return fallback }
        return Unmanaged<NGHTTP2Session>.fromOpaque(userData)._withUnsafeGuaranteedRef(body)
    }

    /// A callback that only tells the session something: 0 (go on) to nghttp2.
    static func notify(_ userData: UnsafeMutableRawPointer?, _ body: (NGHTTP2Session) -> Void) -> Int32 {
        withSession(userData, orElse: 0) { session in
            body(session)
            return 0
        }
    }

    static func bodyProvider() -> nghttp2_data_provider {
        var provider = nghttp2_data_provider()
        provider.read_callback = { _, streamID, buffer, length, flags, _, userData in
            guard let buffer, let flags else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
            return NGHTTP2Session.withSession(userData, orElse: Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)) {
                $0.readBody(streamID, into: buffer, capacity: length, flags: flags)
            }
        }
        return provider
    }

    static func install(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            return NGHTTP2Session.notify(userData) { $0.beginHeaders(frame.pointee.hd.stream_id) }
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _,
            frame,
            name,
            nameLength,
            value,
            valueLength,
            _,
            userData in
            guard let frame, let name, let value else { return 0 }
            return NGHTTP2Session.notify(userData) {
                $0.header(
                    frame.pointee.hd.stream_id,
                    name: UnsafeBufferPointer(start: name, count: nameLength),
                    value: UnsafeBufferPointer(start: value, count: valueLength)
                )
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, userData in
            guard let data else { return 0 }
            return NGHTTP2Session.notify(userData) {
                $0.data(streamID, UnsafeBufferPointer(start: data, count: length))
            }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            return NGHTTP2Session.notify(userData) { $0.frameReceived(frame) }
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            return NGHTTP2Session.notify(userData) { $0.frameSent(frame) }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            NGHTTP2Session.notify(userData) { $0.streamClosed(streamID, errorCode: errorCode) }
        }
    }
}
