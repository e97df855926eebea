import Engine
import Foundation
import NIOCore
import Testing

@testable import Gateway

@Suite("APNs error bodies")
struct APNsErrorBodyTests {
    func answer(status: String, body: String) -> HTTP2Message {
        HTTP2Message(headers: [HTTP2Header(":status", status)], body: ByteBuffer(string: body))
    }

    @Test("APNs' own shapes are read directly, and agree with JSONDecoder")
    func apnsShapes() throws {
        let bodies = [
            #"{"reason":"BadDeviceToken"}"#,
            #"{"reason":"Unregistered","timestamp":1800000000123}"#,
            #"{"timestamp":1800000000123,"reason":"Unregistered"}"#,
            " {\n  \"reason\" : \"TooManyRequests\" ,\t\"timestamp\": 0 }\r\n",
            #"{"reason":"Unregistered","timestamp":1}"#,
            #"{}"#,
        ]
        for body in bodies {
            let direct = try #require(HTTP2PushClient.ErrorBody(apnsShape: ByteBuffer(string: body).readableBytesView))
            let decoded = try JSONDecoder().decode(HTTP2PushClient.ErrorBody.self, from: Data(body.utf8))
            #expect(direct == decoded, "\(body)")
        }
    }

    @Test("Anything else is left to JSONDecoder, and still read")
    func otherBodiesFallBack() {
        let bodies: [(body: String, reason: String?, timestamp: Double?)] = [
            (#"{"reason":"Bad\"Quote"}"#, "Bad\"Quote", nil),
            (#"{"reason":"\u0042adDeviceToken"}"#, "BadDeviceToken", nil),
            (#"{"reason":"Unregistered","timestamp":1.8e12}"#, "Unregistered", 1.8e12),
            (#"{"reason":"Unregistered","timestamp":1800000000123.5}"#, "Unregistered", 1_800_000_000_123.5),
            (#"{"reason":null}"#, nil, nil),
            (#"{"reason":"Shutdown","extra":[1,2]}"#, "Shutdown", nil),
            (#"{"reason":"A","reason":"B"}"#, "A", nil),  // JSONDecoder keeps the first
            (#"{"timestamp":01}"#, nil, nil),
            (#"{"reason":"BadDeviceToken"} x"#, nil, nil),
            (#"{"reason":"BadDeviceToken""#, nil, nil),
            ("", nil, nil),
            ("not json", nil, nil),
        ]
        for (body, reason, timestamp) in bodies {
            #expect(HTTP2PushClient.ErrorBody(apnsShape: ByteBuffer(string: body).readableBytesView) == nil, "\(body)")
            let decoded = try? JSONDecoder().decode(HTTP2PushClient.ErrorBody.self, from: Data(body.utf8))
            #expect(decoded?.reason == reason, "\(body)")
            #expect(decoded?.timestamp == timestamp, "\(body)")
        }
    }

    @Test("An answer's reason and timestamp, through either reader")
    func results() {
        let unregistered = HTTP2PushClient.apnsResult(
            of: answer(status: "410", body: #"{"reason":"Unregistered","timestamp":1800000000123}"#)
        )
        #expect(
            unregistered
                == .rejected(
                    status: 410,
                    reason: "Unregistered",
                    timestamp: Date(timeIntervalSince1970: 1_800_000_000.123)
                )
        )
        let escaped = HTTP2PushClient.apnsResult(of: answer(status: "400", body: #"{"reason":"Bad\u0044eviceToken"}"#))
        #expect(escaped == .rejected(status: 400, reason: "BadDeviceToken", timestamp: nil))
        let empty = HTTP2PushClient.apnsResult(of: answer(status: "500", body: ""))
        #expect(empty == .rejected(status: 500, reason: "HTTP 500", timestamp: nil))
        let accepted = HTTP2PushClient.apnsResult(of: answer(status: "200", body: ""))
        #expect(accepted == .accepted(apnsID: ""))
    }
}
