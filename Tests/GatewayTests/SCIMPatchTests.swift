import Foundation
import Testing

@testable import Gateway

/// SCIM PATCH (issue 46, item 4): RFC 7644's operations and the forms Microsoft Entra ID sends with and without its
/// `aadOptscim062020` flag, applied to a user's and a group's SCIM JSON.
@Suite("SCIM PATCH")
struct SCIMPatchTests {
    static let enterprise = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
    let user: [String: Any] = [
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "id": "u-1", "userName": "ada@acme.example",
        "active": true, "name": ["givenName": "Ada", "familyName": "Byron"],
        "emails": [["type": "work", "value": "ada@acme.example", "primary": true]],
    ]
    let group: [String: Any] = [
        "id": "g-1", "displayName": "Wellbeing pilots", "members": [["value": "u-1"], ["value": "u-2"]],
    ]

    func patch(_ operations: String, _ resource: [String: Any]) throws(SCIMError) -> [String: Any] {
        let body = #"{"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": \#(operations)}"#
        let json = try! JSONSerialization.jsonObject(with: Data(body.utf8))
        return try SCIMPatch(json: json).apply(to: resource)
    }

    func refusal(_ operations: String, _ resource: [String: Any]) -> SCIMError.Kind? {
        do {
            _ = try patch(operations, resource)
            return nil
        } catch {
            return error.scimType
        }
    }

    @Test("Entra ID without its flag: capitalised ops, \"False\", dotted and URN keys, a filtered email, a manager")
    func entraLegacy() throws {
        var result = try patch(#"[{"op": "Replace", "path": "active", "value": "False"}]"#, user)
        #expect(result["active"] as? Bool == false)
        result = try patch(
            #"""
            [{"op": "Add", "path": "emails[type eq \"work\"].value", "value": "ada.lovelace@acme.example"},
             {"op": "Replace", "path": "name.familyName", "value": "Lovelace"},
             {"op": "Add", "path": "externalId", "value": "00aa00aa-bb11"},
             {"op": "Add", "path": "\#(Self.enterprise):manager", "value": "u-9"},
             {"op": "Add", "value": {"\#(Self.enterprise):department": "Research", "title": "Countess"}}]
            """#,
            user
        )
        let emails = result["emails"] as? [[String: Any]]
        #expect(emails?.count == 1 && emails?[0]["value"] as? String == "ada.lovelace@acme.example")
        #expect(emails?[0]["primary"] as? Bool == true)
        #expect((result["name"] as? [String: Any])?["familyName"] as? String == "Lovelace")
        #expect((result["name"] as? [String: Any])?["givenName"] as? String == "Ada")
        #expect(result["externalId"] as? String == "00aa00aa-bb11" && result["title"] as? String == "Countess")
        let extensionPart = result[Self.enterprise] as? [String: Any]
        #expect(extensionPart?["manager"] as? String == "u-9" && extensionPart?["department"] as? String == "Research")
        // The manager removed; a home address added where none matched the filter.
        result = try patch(
            #"""
            [{"op": "Remove", "path": "\#(Self.enterprise):manager"},
             {"op": "Add", "path": "emails[type eq \"home\"].value", "value": "ada@example.org"}]
            """#,
            result
        )
        #expect((result[Self.enterprise] as? [String: Any])?["manager"] == nil)
        #expect((result["emails"] as? [[String: Any]])?.map { $0["type"] as? String } == ["work", "home"])
    }

    @Test("Entra ID with its flag: lowercase ops, booleans, a replace without a path, members by filter")
    func entraFlagged() throws {
        var result = try patch(#"[{"op": "replace", "value": {"active": false, "name.givenName": "Augusta"}}]"#, user)
        #expect(result["active"] as? Bool == false)
        #expect((result["name"] as? [String: Any])?["givenName"] as? String == "Augusta")
        result = try patch(#"[{"op": "remove", "path": "members[value eq \"u-2\"]"}]"#, group)
        #expect((result["members"] as? [[String: Any]])?.map { $0["value"] as? String } == ["u-1"])
        // The same without the flag: the values to remove in value.
        result = try patch(#"[{"op": "Remove", "path": "members", "value": [{"value": "u-1"}]}]"#, group)
        #expect((result["members"] as? [[String: Any]])?.map { $0["value"] as? String } == ["u-2"])
        // Adding members already there adds nothing; removing one already gone changes nothing.
        result = try patch(#"[{"op": "Add", "path": "members", "value": [{"value": "u-2"}, {"value": "u-3"}]}]"#, group)
        #expect((result["members"] as? [[String: Any]])?.map { $0["value"] as? String } == ["u-1", "u-2", "u-3"])
        result = try patch(#"[{"op": "remove", "path": "members[value eq \"u-7\"]"}]"#, group)
        #expect((result["members"] as? [[String: Any]])?.count == 2)
        // Replace without a filter replaces the whole list; remove without one removes it.
        result = try patch(#"[{"op": "replace", "path": "members", "value": [{"value": "u-5"}]}]"#, group)
        #expect((result["members"] as? [[String: Any]])?.map { $0["value"] as? String } == ["u-5"])
        result = try patch(#"[{"op": "remove", "path": "members"}]"#, group)
        #expect(result["members"] == nil)
    }

    @Test(
        "Refused with the RFC's scimType: no PatchOp schema, unknown op, remove without a path, read-only, bad values"
    )
    func refused() {
        let missing = try! JSONSerialization.jsonObject(with: Data(#"{"Operations": []}"#.utf8))
        #expect(throws: SCIMError.self) { try SCIMPatch(json: missing) }
        #expect(refusal("[]", user) == .invalidSyntax)
        #expect(refusal(#"[{"op": "Move", "path": "active", "value": true}]"#, user) == .invalidSyntax)
        #expect(refusal(#"[{"op": "remove"}]"#, user) == .noTarget)
        #expect(refusal(#"[{"op": "replace", "path": "id", "value": "u-2"}]"#, user) == .mutability)
        #expect(refusal(#"[{"op": "replace", "path": "meta.created", "value": "x"}]"#, user) == .mutability)
        #expect(refusal(#"[{"op": "replace", "path": "active", "value": "maybe"}]"#, user) == .invalidValue)
        #expect(refusal(#"[{"op": "replace", "path": "active"}]"#, user) == .invalidValue)
        #expect(refusal(#"[{"op": "replace", "value": "x"}]"#, user) == .invalidValue)
        #expect(refusal(#"[{"op": "replace", "path": "emails[type eq", "value": "x"}]"#, user) == .invalidPath)
        #expect(refusal(#"[{"op": "replace", "path": "a.b.c", "value": "x"}]"#, user) == .invalidPath)
        // One bad operation after good ones: the caller gets an error and keeps the resource it had.
        #expect(
            refusal(
                #"[{"op": "replace", "path": "title", "value": "x"}, {"op": "replace", "path": "id", "value": "y"}]"#,
                user
            )
                == .mutability
        )
        let error = SCIMError(.mutability, "id is read-only")
        #expect(error.body["status"] as? String == "400" && error.body["scimType"] as? String == "mutability")
    }
}
