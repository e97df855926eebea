import Engine
import Foundation
import Testing

@testable import Gateway

@Suite("HTTP/2 header blocks")
struct HTTP2HeaderBlockTests {
    @Test("An APNs request's block holds every field in order, the per-push ones unindexed")
    func apnsBlock() throws {
        let notification = try APNsNotification(
            token: DeviceToken(String(repeating: "0a", count: 32)),
            topic: "com.acme.impulse",
            priority: .throttled,
            expiration: Date(timeIntervalSince1970: 1_900_000_000.75),
            apnsID: "123E4567-E89B-42D3-A456-426614174000",
            collapseID: "impulse-7",
            payload: Data(#"{"aps":{}}"#.utf8)
        )
        let block = notification.headerBlock(authority: "api.push.apple.com", authorization: "bearer a.b.c")
        let fields = block.headers.map { "\($0.name)=\($0.value)\($0.indexed ? "" : " (not indexed)")" }
        #expect(
            fields == [
                ":method=POST", ":scheme=https", ":path=/3/device/" + String(repeating: "0a", count: 32),
                ":authority=api.push.apple.com", "apns-topic=com.acme.impulse", "apns-push-type=alert",
                "apns-priority=5", "apns-expiration=1900000000",
                "apns-id=123e4567-e89b-42d3-a456-426614174000 (not indexed)",
                "apns-collapse-id=impulse-7 (not indexed)", "authorization=bearer a.b.c",
            ]
        )
        #expect(
            notification.headerBlock(authority: "api.push.apple.com", authorization: nil).headers
                == Array(block.headers.dropLast())
        )
    }

    @Test("A block built from header fields gives the same fields back")
    func fromHeaders() {
        var secret = HTTP2Header("X-Token", "s3cret")
        secret.indexed = false
        let headers = [HTTP2Header(":status", "200"), HTTP2Header("content-type", "application/json"), secret]
        #expect(HTTP2HeaderBlock(headers).headers == headers)
        #expect(HTTP2HeaderBlock([]).headers.isEmpty)
    }

    @Test("Decimal digits without a string")
    func decimals() {
        for value: Int64 in [0, 7, 10, 5, 1_900_000_000, -42, .max, .min] {
            var bytes: [UInt8] = [0x41]
            bytes.appendDecimal(value)
            #expect(bytes == [0x41] + Array(String(value).utf8))
        }
    }
}
