import Foundation
import Testing

@testable import Gateway

/// SCIM filters (issue 46, item 4): the forms RFC 7644 gives as examples and the ones Microsoft Entra ID and Okta
/// send, read, matched against users, and the equalities a store answers with an index picked out.
@Suite("SCIM filters")
struct SCIMFilterTests {
    let ada: [String: Any] = [
        "id": "u-1", "externalId": "00aa00aa-BB11", "userName": "Ada.Lovelace@acme.example", "userType": "Employee",
        "title": "Engineer", "active": true,
        "emails": [
            ["type": "work", "value": "ada@acme.example", "primary": true],
            ["type": "home", "value": "ada@example.org"],
        ],
        "meta": ["lastModified": "2026-11-20T08:00:00Z"],
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": ["department": "Research"],
    ]
    let grace: [String: Any] = [
        "id": "u-2", "userName": "grace@acme.example", "userType": "Contractor", "active": "False",
        "emails": [["type": "work", "value": "grace@globex.example"]],
    ]

    func filter(_ text: String) throws -> SCIMFilter { try SCIMFilter(parsing: text) }

    func matching(_ text: String) throws -> [String] {
        try [ada, grace].filter { try filter(text).matches($0) }.map { $0["id"] as! String }
    }

    @Test("What Entra ID and Okta send: userName, externalId and work email equalities, answered by index")
    func directoryLookups() throws {
        #expect(
            try filter(#"userName eq "ada.lovelace@ACME.example""#).lookup == .userName("ada.lovelace@ACME.example")
        )
        #expect(try matching(#"userName eq "ada.lovelace@ACME.example""#) == ["u-1"])
        #expect(try filter(#"externalId eq "00aa00aa-BB11""#).lookup == .externalID("00aa00aa-BB11"))
        #expect(try matching(#"externalId eq "00aa00aa-BB11""#) == ["u-1"])
        // externalId is caseExact.
        #expect(try matching(#"externalId eq "00AA00AA-bb11""#) == [])
        let work = try filter(#"emails[type eq "work"].value eq "grace@globex.example""#)
        #expect(work.lookup == .email("grace@globex.example", type: "work"))
        #expect(try matching(#"emails[type eq "work"].value eq "grace@globex.example""#) == ["u-2"])
        #expect(try matching(#"emails[type eq "work"].value eq "ada@example.org""#) == [])
        #expect(try filter(#"emails.value eq "ada@example.org""#).lookup == .email("ada@example.org", type: nil))
        #expect(try filter(#"USERNAME EQ "x""#).lookup == .userName("x"))
        #expect(try filter(#"userName sw "a""#).lookup == nil)
        #expect(try filter(#"userName eq "a" and active eq true"#).lookup == nil)
    }

    @Test("RFC 7644's examples: presence, and/or/not with parentheses, bracket filters, URN paths, times")
    func rfcExamples() throws {
        #expect(try matching(#"title pr and userType eq "Employee""#) == ["u-1"])
        #expect(try matching(#"title pr or userType eq "Intern""#) == ["u-1"])
        #expect(
            try matching(#"userType eq "Employee" and (emails co "acme.example" or emails.value co "example.org")"#)
                == ["u-1"]
        )
        #expect(
            try matching(#"userType ne "Employee" and not (emails co "acme.example" or emails.value co "example.org")"#)
                == ["u-2"]
        )
        #expect(try matching(#"emails[type eq "work" and value co "@acme.example"] or ims[type eq "xmpp"]"#) == ["u-1"])
        #expect(try matching(#"meta.lastModified gt "2011-05-13T04:42:34Z""#) == ["u-1"])
        #expect(try matching(#"urn:ietf:params:scim:schemas:core:2.0:User:userName sw "G""#) == ["u-2"])
        #expect(try matching(#"title ne "Engineer""#) == ["u-2"])
        let department = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department"
        #expect(try matching(department + #" eq "research""#) == ["u-1"])
        #expect(try matching(department + " pr") == ["u-1"])
        #expect(try matching(#"title eq null"#) == ["u-2"])
        // Booleans, including the "False" string Entra ID writes for one.
        #expect(try matching("active eq true") == ["u-1"])
        #expect(try matching("active eq false") == ["u-2"])
        #expect(try matching(#"userName ew "ACME.EXAMPLE""#) == ["u-1", "u-2"])
        #expect(try matching(#"userName eq "with \"quote\"""#) == [])
    }

    @Test("Bad filters are refused with a reason: no value, no operator, open parentheses, trailing words, depth")
    func refused() throws {
        for text in [
            "", "userName eq", #"userName foo "x""#, #"(userName eq "x""#, #"userName eq "x" extra"#,
            #"userName eq "open"#, #"not userName eq "x""#, #"emails[type eq "work""#, "userName eq bare",
            #"1abc eq "x""#, #"a.b.c eq "x""#, #"emails.value[type eq "x"]"#,
            String(repeating: "(", count: 40) + #"userName eq "x""# + String(repeating: ")", count: 40),
            #"userName eq ""# + String(repeating: "x", count: SCIMFilter.maximumLength) + #"""#,
        ] {
            #expect(throws: SCIMFilterError.self, "\(text.prefix(60))") { try SCIMFilter(parsing: text) }
        }
        do {
            _ = try SCIMFilter(parsing: #"userName foo "x""#)
        } catch {
            #expect(error.description.contains("'foo' is not an operator"), "\(error)")
        }
    }
}
