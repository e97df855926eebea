import Foundation
import Gateway
import Testing

@Suite("Push payload")
struct ImpulsePayloadTests {
    @Test("The payload is JSON with sorted keys, escaping what JSON needs escaped")
    func encoding() throws {
        let plain = try ImpulsePayload(title: "Breathe", badge: 3, impulseID: "w-1").encoded()
        #expect(
            String(decoding: plain, as: UTF8.self)
                == #"{"aps":{"alert":{"title":"Breathe"},"badge":3},"impulseID":"w-1"}"#
        )
        let tricky = "Say \"thanks\"\\ now\n\t\u{01} – 🙂 / done"
        let data = try ImpulsePayload(title: tricky, body: "b", badge: -2, impulseID: "id\"x", sound: "s").encoded()
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title"] as? String == tricky)
        #expect(alert["body"] as? String == "b")
        #expect(aps["badge"] as? Int == 0)
        #expect(aps["sound"] as? String == "s")
        #expect(object["impulseID"] as? String == "id\"x")
    }
}
