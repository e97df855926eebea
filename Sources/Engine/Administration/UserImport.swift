import Foundation

/// One user of a bulk import: who, and what to set. A row for a username the tenant has updates that user (only
/// the members given); any other creates one, which needs a password or a password hash.
public struct UserImportRow: Sendable {
    /// Where the row starts in the file (1-based; the CSV header is line 1).
    public var line: Int
    public var username: String
    public var password: String?
    /// A bcrypt hash (`$2a$`, `$2b$` or `$2y$`), as the system the broker replaces kept them: stored as it is.
    public var passwordHash: String?
    public var changes: UserChanges

    public init(line: Int, username: String, password: String? = nil, passwordHash: String? = nil, changes: UserChanges)
    {
        self.line = line
        self.username = username
        self.password = password
        self.passwordHash = passwordHash
        self.changes = changes
    }
}

/// Whether a rejected row rejects the whole import or only itself.
public enum UserImportMode: String, Sendable {
    case allOrNothing = "all-or-nothing"
    case perRow = "per-row"
}

/// What became of each row of an import.
public struct UserImportReport: Sendable, Encodable {
    public struct Row: Sendable, Encodable, Equatable {
        public enum Result: String, Sendable, Encodable { case created, updated, unchanged, rejected }
        public var line: Int
        public var username: String?
        public var result: Result
        public var reason: String?
    }

    /// Rows listed at most, of each kind: an import's report stays small whatever its size (a million-row file
    /// once answered a 94 MiB report, built in memory).
    public static let listed = 1_000

    public var mode: String
    /// False when an all-or-nothing import was refused: nothing was written.
    public var committed: Bool
    public var created = 0
    public var updated = 0
    public var unchanged = 0
    public var rejected = 0
    /// The first ``listed`` rows written or unchanged, and the first ``listed`` rejected rows, by line.
    public var rows: [Row] = []
    /// Rows counted above but not listed in `rows`.
    public var omitted = 0
    var listedRejected = 0

    enum CodingKeys: String, CodingKey { case mode, committed, created, updated, unchanged, rejected, rows, omitted }

    mutating func add(_ row: Row) {
        switch row.result {
        case .created: created += 1
        case .updated: updated += 1
        case .unchanged: unchanged += 1
        case .rejected: rejected += 1
        }
        if row.result == .rejected ? listedRejected < Self.listed : rows.count - listedRejected < Self.listed {
            rows.append(row)
            if row.result == .rejected { listedRejected += 1 }
        } else {
            omitted += 1
        }
    }

    /// An all-or-nothing import that was refused: only its rejected rows are listed (nothing was written).
    mutating func keepRejectedOnly() {
        rows = rows.filter { $0.result == .rejected }
        omitted = rejected - rows.count
        created = 0
        updated = 0
        unchanged = 0
    }
}

/// A row the parser could not read: its line and why.
public struct UserImportRowError: Error, Sendable, Equatable {
    public var line: Int
    public var reason: String
    /// The file cannot be read at all (a CSV without a usable header): the import is refused, nothing written.
    public var fatal: Bool

    public init(line: Int, reason: String, fatal: Bool = false) {
        self.line = line
        self.reason = reason
        self.fatal = fatal
    }
}

extension Administration {
    /// Imports users from `rows` as they arrive, idempotent by username: a new username is created, a known one
    /// updated with the members its row gives (unchanged when they change nothing and no password is given).
    ///
    /// `allOrNothing` writes nothing unless every row is valid (then all in one transaction); `perRow` writes
    /// each batch of valid rows as it goes and reports the others. Passwords are hashed as rows arrive (bcrypt,
    /// the configured cost); a `passwordHash` is stored as it is. Every write is audited like a single one.
    /// New users start as `firstDelivery` says, else as the tenant's setting does.
    public func importUsers<Rows: AsyncSequence>(
        tenant: TenantID,
        rows: Rows,
        mode: UserImportMode,
        firstDelivery: FirstDelivery? = nil,
        by actor: AdminActor,
        batchSize: Int = 100,
        allOrNothingRows: Int = Administration.allOrNothingRows,
        updated: @Sendable ([String]) async -> Void = { _ in }
    ) async throws -> UserImportReport
    where Rows.Element == Result<UserImportRow, UserImportRowError> {
        // Told of the users each write changed as soon as it commits (their cached credentials must go then, not
        // when the import ends: a body cut short ends it with an error, after batches were written).
        func changed(_ writes: [UserWrite]) async {
            let names = writes.compactMap { write -> String? in
                let outcome = write.outcome(line: 0)
                return outcome.result == .updated ? outcome.username : nil
            }
            if !names.isEmpty { await updated(names) }
        }
        let owner = try await self.tenant(tenant, by: actor)
        let start = firstDelivery ?? owner.firstDelivery
        var report = UserImportReport(mode: mode.rawValue, committed: true)
        // Usernames seen, by a 64-bit hash of each (16 bytes a row, not the names: a 64 MiB file has about a
        // million rows). Two names of one file sharing a hash (about one chance in 10^7 at a million rows) would
        // reject the second as a repeat.
        var seen: [UInt64: Int32] = [:]
        var batch: [(row: UserImportRow, write: UserWrite)] = []
        var held: [UserWrite] = []
        var audits: [AuditEntry] = []

        func flush() async throws {
            guard !batch.isEmpty else { return }
            let prepared = try await hashPasswords(batch, tenant: tenant)
            batch.removeAll()
            if mode == .allOrNothing {
                if report.rejected == 0 {
                    // Held until the end, in memory: bounded, and one transaction at the end.
                    guard held.count + prepared.count <= allOrNothingRows else {
                        throw EngineError(
                            .tooLarge,
                            "an all-or-nothing import takes at most \(allOrNothingRows) rows to write; import "
                                + "larger files per row (mode=per-row), which is safe to run again"
                        )
                    }
                    held += prepared.map(\.write)
                    audits += prepared.map { audit(actor, $0.write.action, tenant, $0.row.username) }
                }
                for item in prepared { report.add(item.write.outcome(line: item.row.line)) }
                return
            }
            do {
                try await store.writeUsers(
                    prepared.map(\.write),
                    audit: prepared.map { audit(actor, $0.write.action, tenant, $0.row.username) }
                )
                await changed(prepared.map(\.write))
                for item in prepared { report.add(item.write.outcome(line: item.row.line)) }
            } catch {
                // One row of the batch could not be written (a username taken meanwhile): each on its own.
                for item in prepared {
                    do {
                        try await store.writeUsers(
                            [item.write],
                            audit: [audit(actor, item.write.action, tenant, item.row.username)]
                        )
                        await changed([item.write])
                        report.add(item.write.outcome(line: item.row.line))
                    } catch {
                        let reason = (error as? EngineError)?.message ?? "the store refused the row"
                        report.add(
                            .init(line: item.row.line, username: item.row.username, result: .rejected, reason: reason)
                        )
                    }
                }
            }
        }

        for try await parsed in rows {
            let row: UserImportRow
            switch parsed {
            case .failure(let error):
                if error.fatal {
                    // Only a header can be fatal, and it comes before any row: nothing has been written.
                    throw EngineError(.invalidInput, "line \(error.line): \(error.reason)")
                }
                report.add(.init(line: error.line, username: nil, result: .rejected, reason: error.reason))
                continue
            case .success(let value): row = value
            }
            let key = Self.usernameKey(UsernameMatch.key(row.username))
            if let first = seen[key] {
                report.add(
                    .init(
                        line: row.line,
                        username: row.username,
                        result: .rejected,
                        reason: "the username is on line \(first) already"
                    )
                )
                continue
            }
            seen[key] = Int32(clamping: row.line)
            do {
                let write = try await prepare(row, tenant: tenant, starting: start)
                if case .unchanged = write {
                    report.add(write.outcome(line: row.line))
                } else {
                    // An all-or-nothing import that has a rejected row hashes nothing more: it will not be written.
                    if mode == .allOrNothing, report.rejected > 0 { continue }
                    batch.append((row, write))
                }
            } catch let error as EngineError {
                report.add(.init(line: row.line, username: row.username, result: .rejected, reason: error.message))
            }
            if batch.count >= batchSize { try await flush() }
        }
        try await flush()
        if mode == .allOrNothing {
            if report.rejected > 0 {
                report.committed = false
                // Rows that would have been written are not reported as such: none was.
                report.keepRejectedOnly()
            } else if !held.isEmpty {
                try await store.writeUsers(held, audit: audits)
                await changed(held)
            }
        }
        report.rows.sort { $0.line < $1.line }
        return report
    }

    /// What a valid row writes, before its password is hashed; throws the reason a row is rejected.
    private func prepare(
        _ row: UserImportRow,
        tenant: TenantID,
        starting firstDelivery: FirstDelivery
    ) async throws -> UserWrite {
        if let password = row.password { try Self.validate(password: password) }
        if let hash = row.passwordHash {
            guard row.password == nil else {
                throw EngineError(.invalidInput, "give password or passwordHash, not both")
            }
            try Self.validate(bcryptHash: hash)
        }
        if var user = try await store.user(tenant: tenant, username: row.username) {
            let before = user
            try row.changes.apply(to: &user)
            // The hash the user has already changes nothing (re-importing an export is idempotent); a password
            // would need a bcrypt check as costly as hashing it, so it is written.
            let newHash = row.passwordHash == before.passwordHash ? nil : row.passwordHash
            if user == before, row.password == nil, newHash == nil { return .unchanged(user) }
            return .update(user, password: row.password, passwordHash: newHash)
        }
        guard row.password != nil || row.passwordHash != nil else {
            throw EngineError(.invalidInput, "a new user needs a password or a passwordHash")
        }
        let (new, enabled) = try Self.newUser(
            tenant: tenant,
            username: row.username,
            passwordHash: row.passwordHash ?? "",
            row.changes,
            starting: firstDelivery,
            at: now()
        )
        return .create(new, enabled: enabled, password: row.password)
    }

    /// The batch with its passwords hashed, several at once (bcrypt runs on the thread pool).
    private func hashPasswords(
        _ batch: [(row: UserImportRow, write: UserWrite)],
        tenant: TenantID
    ) async throws -> [(row: UserImportRow, write: UserWrite)] {
        try await withThrowingTaskGroup(of: (Int, String).self) { group in
            var result = batch
            for (index, item) in batch.enumerated() {
                guard let password = item.write.password else { continue }
                group.addTask { (index, try await hashPassword(password, tenant)) }
            }
            for try await (index, hash) in group { result[index].write.setHash(hash) }
            return result
        }
    }

    /// Rows an all-or-nothing import may write (they are held in memory until its one transaction).
    public static let allOrNothingRows = 100_000

    /// FNV-1a, 64 bits, of a username's UTF-8 (stable, for the import's memory of names it has seen).
    static func usernameKey(_ username: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in username.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }

    /// A bcrypt hash as the import takes one: `$2a$`, `$2b$` or `$2y$`, a two-digit cost of 4-31, 53 characters
    /// of bcrypt's base 64.
    public static func validate(bcryptHash hash: String) throws(EngineError) {
        let bytes = Array(hash.utf8)
        let alphabet = Set("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        guard bytes.count == 60, hash.hasPrefix("$2a$") || hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$"),
            bytes[6] == UInt8(ascii: "$"), let cost = Int(String(decoding: bytes[4..<6], as: UTF8.self)),
            (4...31).contains(cost), bytes[7...].allSatisfy({ alphabet.contains($0) })
        else {
            throw EngineError(.invalidInput, "passwordHash must be a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters)")
        }
    }
}

/// One user write of an import, as the store commits it.
public enum UserWrite: Sendable {
    /// A new user; `password` is hashed into `user.passwordHash` before the write.
    case create(NewUser, enabled: Bool, password: String?)
    /// Changes to a known user; a new hash when a password or hash was given.
    case update(User, password: String?, passwordHash: String?)
    /// Nothing to write.
    case unchanged(User)

    var password: String? {
        switch self {
        case .create(_, _, let password), .update(_, let password, _): password
        case .unchanged: nil
        }
    }

    mutating func setHash(_ hash: String) {
        switch self {
        case .create(var new, let enabled, _):
            new.passwordHash = hash
            self = .create(new, enabled: enabled, password: nil)
        case .update(let user, _, _): self = .update(user, password: nil, passwordHash: hash)
        case .unchanged: break
        }
    }

    var action: String {
        switch self {
        case .create: "user.create"
        case .update, .unchanged: "user.update"
        }
    }

    func outcome(line: Int) -> UserImportReport.Row {
        switch self {
        case .create(let new, _, _): .init(line: line, username: new.username, result: .created)
        case .update(let user, _, _): .init(line: line, username: user.username, result: .updated)
        case .unchanged(let user): .init(line: line, username: user.username, result: .unchanged)
        }
    }
}
