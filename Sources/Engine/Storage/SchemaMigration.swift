import Foundation

/// Whether opening a store may change its schema.
///
/// Upgrades are expand/contract: a release's migrations only add, so the previous release's nodes keep working on
/// the new schema while the new release's nodes start. Who applies them is an operator's decision (`broker
/// migrate`, or a node started with `--migrate`), never a side effect of an admin command or of a node's start.
public enum MigrationPolicy: Sendable, Equatable {
    /// Apply every migration the database lacks (`broker migrate`, `--migrate`, the demo, tests).
    case apply
    /// Create the schema of an empty database (a first start), but refuse one that lacks migrations, naming them
    /// and the command that applies them.
    case refusePending
    /// Leave the schema as it is (`broker migrate --check`).
    case leave
}

/// A migration the database lacks, and the work it will do on the rows there are.
public struct PendingMigration: Sendable, Equatable, CustomStringConvertible {
    /// The migration's name as the store records it (`v17-...` in SQLite, `17 ...` in PostgreSQL).
    public var name: String
    /// The tables it reads, rewrites or indexes that hold rows, with their rows (PostgreSQL's estimate).
    public var work: [Work]

    public struct Work: Sendable, Equatable {
        public var table: String
        public var action: MigrationStatements.Action
        public var rows: Int
    }

    public init(name: String, work: [Work]) {
        self.name = name
        self.work = work
    }

    /// One line: the name and the work, or that it only changes the schema.
    public var description: String {
        let busy = work.filter { $0.rows > 0 }
        guard !busy.isEmpty else { return "\(name): schema only, no rows to touch" }
        let parts = busy.map { "\($0.action.rawValue) \($0.table) (\($0.rows.formatted(.number)) rows)" }
        return "\(name): " + parts.joined(separator: ", ")
    }
}

/// What a migration's SQL does to existing rows, and whether it would break the previous release's code; read
/// from the statements themselves, so that the cost `broker migrate --check` shows cannot drift from the SQL.
public enum MigrationStatements {
    public enum Action: String, Sendable, Equatable {
        case rewrites
        case indexes
        case reads
    }

    /// The tables a statement touches row by row: `UPDATE t`, `DELETE FROM t`, `INSERT INTO x SELECT ... FROM t`,
    /// `CREATE INDEX ... ON t`, `ALTER TABLE t ALTER COLUMN ... TYPE`.
    public static func work(_ statement: String) -> [(table: String, action: Action)] {
        let words = tokens(statement)
        guard let first = words.first else { return [] }
        switch first {
        case "update":
            return words.count > 1 ? [(words[1], .rewrites)] : []
        case "delete":
            return words.count > 2 && words[1] == "from" ? [(words[2], .rewrites)] : []
        case "insert":
            guard words.contains("select") else { return [] }
            return words.indices.dropLast().filter { words[$0] == "from" || words[$0] == "join" }.map {
                (words[$0 + 1], .reads)
            }
        case "create":
            guard let on = words.firstIndex(of: "on"), words.contains("index"), on + 1 < words.count else { return [] }
            return [(words[on + 1], .indexes)]
        case "alter":
            guard words.count > 2, words[1] == "table", words.contains("type") else { return [] }
            return [(words[2], .rewrites)]
        default:
            return []
        }
    }

    /// Why a statement would break nodes of the previous release still running on the schema (a contraction:
    /// dropping or renaming what they read, or a constraint their writes do not meet), or nil for an expansion.
    public static func contraction(_ statement: String) -> String? {
        let words = tokens(statement)
        guard let first = words.first else { return nil }
        if first == "drop", words.count > 1, words[1] == "table" || words[1] == "view" {
            return "drops a \(words[1])"
        }
        guard first == "alter", words.count > 2, words[1] == "table" else { return nil }
        if words.contains("rename") { return "renames in \(words[2])" }
        if words.contains("drop"), words.contains("column") { return "drops a column of \(words[2])" }
        if words.contains("type") { return "changes a column type of \(words[2])" }
        if let set = words.firstIndex(of: "set"), set + 2 < words.count, words[set + 1] == "not",
            words[set + 2] == "null"
        {
            return "makes a column of \(words[2]) required"
        }
        if words.contains("add"), words.contains("not"), words.contains("null"), !words.contains("default") {
            return "adds a required column without a default to \(words[2])"
        }
        return nil
    }

    /// Lower-cased words and identifiers, without quotes, comments or `IF [NOT] EXISTS` / `UNIQUE` / `CONCURRENTLY`
    /// (which change nothing about the rows touched).
    static func tokens(_ statement: String) -> [String] {
        let uncommented = statement.split(separator: "\n").map { line in
            line.range(of: "--").map { line[..<$0.lowerBound] } ?? line
        }.joined(separator: " ")
        let separators = CharacterSet.whitespacesAndNewlines.union(CharacterSet(charactersIn: "(),;\"`"))
        let words = uncommented.lowercased().components(separatedBy: separators).filter { !$0.isEmpty }
        var result: [String] = []
        var index = 0
        while index < words.count {
            if words[index] == "if", index + 1 < words.count, words[index + 1] == "exists" {
                index += 2
                continue
            }
            if words[index] == "if", index + 2 < words.count, words[index + 1] == "not", words[index + 2] == "exists" {
                index += 3
                continue
            }
            if words[index] == "unique" && result == ["create"] || words[index] == "concurrently"
                || words[index] == "only"
            {
                index += 1
                continue
            }
            result.append(words[index])
            index += 1
        }
        return result
    }
}

extension EngineError {
    /// A store that lacks migrations, opened by a command that may not apply them.
    static func pendingMigrations(_ pending: [String]) -> EngineError {
        EngineError(
            .storage,
            """
            the database lacks \(pending.count) migration\(pending.count == 1 ? "" : "s") \
            (\(pending.joined(separator: ", "))): see what they do with `broker migrate --check`, apply them with \
            `broker migrate` (nodes of the previous release keep working on the new schema), or start with --migrate
            """
        )
    }
}

/// The schema's migrations, for `broker migrate` and the checks at start.
public protocol SchemaStore: Sendable {
    /// The migrations the database lacks, oldest first, with the rows each one will touch.
    func pendingMigrations() async throws -> [PendingMigration]
    /// Applies the migrations the database lacks (under a lock where several nodes share it); their names.
    func applyMigrations() async throws -> [String]
    /// The names of the migrations applied, oldest first.
    func schemaNames() async throws -> [String]
    /// Migrations the database has that this broker does not know (a newer release applied them), oldest first.
    func unknownMigrations() async throws -> [String]
    /// Usernames that differ only in case (``UsernameMatch``), per tenant: kept apart by the migration that made
    /// usernames unique without regard to case, for an operator to rename or delete. Read on any schema version.
    func caseTwins() async throws -> [CaseTwins]
}

/// Usernames of one tenant that differ only in case.
public struct CaseTwins: Sendable, Equatable, CustomStringConvertible {
    public var tenant: TenantID
    public var usernames: [String]

    public init(tenant: TenantID, usernames: [String]) {
        self.tenant = tenant
        self.usernames = usernames
    }

    public var description: String { "\(tenant): \(usernames.joined(separator: ", "))" }
}
