import Engine
import Foundation
import Gateway
import Testing

/// One shape for paging: every list's `next` is a relative URL to follow as it is (`/v1/impulses` had a path, the
/// admin lists a bare query; passing one back as `after=` looped on the first page).
@Suite("Paging: next is a relative URL everywhere")
struct PagingTests {
    @Test("The audit trail pages by following next as it is, to its end")
    func auditTrail() async throws {
        try await TestBroker.run { broker in
            func get(_ path: String) async throws -> TestBroker.Reply {
                try await broker.send(.GET, path, user: nil, headers: AdminAPITests.bearer)
            }
            for name in ["one", "two", "three"] {
                let created = try await broker.send(
                    .POST,
                    "/admin/v1/tenants",
                    user: nil,
                    headers: AdminAPITests.bearer + [("Content-Type", "application/json")],
                    body: #"{"id": "\#(name)"}"#
                )
                #expect(created.status == 201, "\(created.text)")
            }
            var path: String? = "/admin/v1/audit?limit=2"
            var ids: [Int] = []
            var pages = 0
            while let next = path, pages < 10 {
                pages += 1
                let page = try await get(next)
                #expect(page.status == 200, "\(next): \(page.text)")
                ids += (page.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
                path = page.json["next"] as? String
                if let path { #expect(path.hasPrefix("/admin/v1/audit?before="), "\(path)") }
            }
            #expect(ids.count >= 3 && Set(ids).count == ids.count, "\(ids)")
            #expect(ids == ids.sorted(by: >), "newest first, no page twice: \(ids)")
        }
    }
}
