import Engine
import Foundation
import TestSupport
import Testing

/// An import's memory does not grow with its report: rows are listed up to a bound, the rest counted; an
/// all-or-nothing import, which holds its writes until its one transaction, has a bound of rows.
@Suite("User import bounds", .timeLimit(.minutes(2)))
struct UserImportBoundsTests {
    static let hash = "$2b$04$" + String(repeating: "a", count: 53)

    func rows(_ count: Int, rejectedEvery: Int? = nil) -> AsyncStream<Result<UserImportRow, UserImportRowError>> {
        AsyncStream { continuation in
            for line in 2..<(count + 2) {
                if let every = rejectedEvery, line % every == 0 {
                    continuation.yield(.failure(UserImportRowError(line: line, reason: "a bad row")))
                } else {
                    continuation.yield(
                        .success(
                            UserImportRow(line: line, username: "u\(line)", passwordHash: Self.hash, changes: .init())
                        )
                    )
                }
            }
            continuation.finish()
        }
    }

    @Test("A byte-order mark is dropped however the parts split it; bytes that only begin like one are kept")
    func byteOrderMark() {
        let csv = Array("username,password\njo,secret-pass\n".utf8)
        for split in 0...4 {
            var parser = UserImportParser(format: .csv)
            let bytes = [0xEF, 0xBB, 0xBF] + csv
            let rows = parser.feed(bytes.prefix(split)) + parser.feed(bytes.dropFirst(split)) + parser.finish()
            let names = rows.compactMap { try? $0.get().username }
            #expect(names == ["jo"], "split at \(split): \(rows)")
        }
        // An EF that is not a byte-order mark's is the header's first byte: the column is not `username`.
        var parser = UserImportParser(format: .csv)
        let rows = parser.feed([0xEF] + csv) + parser.finish()
        #expect(rows.contains { if case .failure(let error) = $0 { error.fatal } else { false } }, "\(rows)")
    }

    @Test("A per-row import of 3,000 rows, 1,500 rejected: 1,000 of each listed, the rest counted as omitted")
    func reportIsBounded() async throws {
        let f = try await StoreFixture.make()
        let administration = Administration(store: f.store, hashPassword: { password, _ in password })
        let report = try await administration.importUsers(
            tenant: f.acme,
            rows: rows(3_000, rejectedEvery: 2),
            mode: .perRow,
            by: .commandLine
        )
        #expect(report.created == 1_500 && report.rejected == 1_500)
        #expect(report.rows.filter { $0.result == .rejected }.count == 1_000)
        #expect(report.rows.filter { $0.result == .created }.count == 1_000)
        #expect(report.omitted == 1_000)
        #expect(report.rows.map(\.line) == report.rows.map(\.line).sorted())
        #expect(try await f.store.user(tenant: f.acme, username: "u2999") != nil)
    }

    @Test("An all-or-nothing import past its bound of rows is refused and writes nothing")
    func allOrNothingIsBounded() async throws {
        let f = try await StoreFixture.make()
        let administration = Administration(store: f.store, hashPassword: { password, _ in password })
        await #expect(throws: EngineError.self) {
            _ = try await administration.importUsers(
                tenant: f.acme,
                rows: rows(500),
                mode: .allOrNothing,
                by: .commandLine,
                allOrNothingRows: 300
            )
        }
        #expect(try await f.store.user(tenant: f.acme, username: "u2") == nil)
        let fits = try await administration.importUsers(
            tenant: f.acme,
            rows: rows(300),
            mode: .allOrNothing,
            by: .commandLine,
            allOrNothingRows: 300
        )
        #expect(fits.committed && fits.created == 300)
    }
}
