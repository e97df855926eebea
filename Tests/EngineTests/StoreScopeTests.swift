import Foundation
import GRDB
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import Engine

/// The stores' binding, parsing, tenant scoping and conflicts (the rest of `StoreTests`).
extension StoreTests {
    @Test("Values bound straight through SQLite land in their parameters in order; a wrong count runs nothing")
    func positionalBinding() async throws {
        let fixture = try await StoreFixture.make(.sqlite)
        let queue = try DatabaseQueue(path: fixture.location)
        try await queue.write { db in
            try db.execute(sql: "CREATE TABLE bound (a INTEGER, b TEXT, c REAL, d BLOB, e TEXT)")
            let insert = try db.cachedStatement(sql: "INSERT INTO bound VALUES (?, ?, ?, ?, ?)")
            try insert.bindPositionally([
                7.databaseValue, "seven".databaseValue, 7.5.databaseValue, .null, "x".databaseValue,
            ])
            try insert.execute()
            // The same cached statement again: nothing of the first binding is left over.
            try insert.bindPositionally([8.databaseValue, .null, 8.5.databaseValue, Data([1, 2]).databaseValue, .null])
            try insert.execute()
            // Text is stored byte for byte as GRDB's own binding stores it: multi-byte characters whole, an
            // embedded NUL ending it as a C string ends, an empty string as empty text (not NULL).
            for text in ["Grüße 🌿", "before\u{0}after", ""] {
                try insert.bindPositionally([
                    9.databaseValue, text.databaseValue, 0.0.databaseValue, .null, text.databaseValue,
                ])
                try insert.execute()
                try db.execute(sql: "INSERT INTO bound VALUES (10, ?, 0, NULL, ?)", arguments: [text, text])
                let stored = try Row.fetchAll(
                    db,
                    sql: "SELECT hex(b), b IS NULL, hex(e) FROM bound WHERE a IN (9, 10) ORDER BY a"
                )
                #expect(stored.count == 2)
                #expect(stored.first == stored.last, "\(text.debugDescription)")
                #expect(stored.first?[1] == false)
                try db.execute(sql: "DELETE FROM bound WHERE a IN (9, 10)")
            }
            #expect(throws: DatabaseError.self) { try insert.bindPositionally([9.databaseValue]) }
            #expect(throws: DatabaseError.self) { try insert.bindPositionally(Array(repeating: .null, count: 6)) }
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM bound ORDER BY a")
            #expect(rows.count == 2)
            #expect(rows[0] == ["a": 7, "b": "seven", "c": 7.5, "d": nil, "e": "x"])
            #expect(rows[1] == ["a": 8, "b": nil, "c": 8.5, "d": Data([1, 2]), "e": nil])
            // A query: bound, then read through GRDB's cursor without arguments.
            let select = try db.cachedStatement(sql: "SELECT b FROM bound WHERE a = ? AND c > ?")
            try select.bindPositionally([7.databaseValue, 7.0.databaseValue])
            #expect(try String.fetchAll(select) == ["seven"])
            try select.bindPositionally([8.databaseValue, 9.0.databaseValue])
            #expect(try String.fetchAll(select).isEmpty)
        }
    }

    @Test("Life area scores read back as written; other stored text reads as the general parser reads it")
    func scoresDecoding() throws {
        let scores = try LifeAreaScores([0, 100, 5, 50, 99, 1, 10, 20, 30, 40, 60, 70])
        #expect(try StoredForm.decodeScores(StoredForm.encodeScores(scores)) == scores)
        for text in [
            "1,2,3,4,5,6,7,8,9,10,11,12", ",1,,2,3,4,5,6,7,8,9,10,11,12,", "1, 2,3,4,5,6,7,8,9,10,11,12",
            "-1,2,3,4,5,6,7,8,9,10,11,12", "+1,2,3,4,5,6,7,8,9,10,11,12", "1,2,3,4,5,6,7,8,9,10,11",
            "1,2,3,4,5,6,7,8,9,10,11,12,13", "101,2,3,4,5,6,7,8,9,10,11,12", "9999999999,2,3,4,5,6,7,8,9,10,11,12",
            "x,1,2,3,4,5,6,7,8,9,10,11,12", "", "0000000001,2,3,4,5,6,7,8,9,10,11,12",
        ] {
            let general = try? LifeAreaScores(text.split(separator: ",").compactMap { Int($0) })
            #expect((try? StoredForm.decodeScores(text)) == general, "\(text)")
        }
    }

    @Test("Queries are scoped by tenant", arguments: StoreKind.allCases)
    func scoping(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        #expect(try await f.store.user(tenant: f.globex, id: f.a.id) == nil)
        #expect(try await f.store.user(tenant: f.globex, username: "b") == nil)
        #expect(try await f.store.users(tenant: f.acme).map(\.username) == ["a", "b"])
        #expect(try await !f.store.setEnabled(tenant: f.globex, username: "b", enabled: false))
        #expect(try await f.store.user(tenant: f.acme, username: "b")?.enabled == true)
        await #expect(throws: EngineError.self) {
            try await f.store.setPreferences(tenant: f.globex, user: f.a.id, language: nil, preferences: .init())
        }
    }

    @Test(
        "The change feed carries credential, catalog and ledger changes with their origin",
        arguments: StoreKind.allCases
    )
    func changeFeed(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let start = try await f.store.latestChangeSequence()
        let other = try await StoreFixture.open(kind, f.location)
        #expect(try await other.setPassword(tenant: f.acme, username: "a", passwordHash: "y"))
        _ = try await f.store.recordDeliveries([
            NewDelivery(tenant: f.acme, user: f.b.id, impulse: try ImpulseID("two"), kind: .manual, assignedAt: Date())
        ])
        let changes = try await f.store.changes(after: start, limit: 10)
        #expect(changes.map(\.subject) == [.credentials(username: "a"), .ledger(f.b.id)])
        #expect(changes.map(\.origin) == [other.nodeID, f.store.nodeID])
        #expect(other.nodeID != f.store.nodeID)
        #expect(try await f.store.pruneChanges(before: Date().addingTimeInterval(60)) >= 2)
        #expect(try await f.store.changes(after: 0, limit: 10).isEmpty)
    }

    @Test("A duplicate tenant or username is a conflict, not a crash", arguments: StoreKind.allCases)
    func conflicts(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        await #expect(throws: EngineError(.conflict, "the record already exists")) {
            try await f.store.createTenant(try Tenant(id: f.acme, name: "again"))
        }
        await #expect(throws: EngineError(.conflict, "the record already exists")) {
            _ = try await f.store.createUser(try NewUser(tenant: f.acme, username: "a", passwordHash: "x"))
        }
    }
}
