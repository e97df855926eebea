import GRDB
import GRDBSQLite

extension Statement {
    /// Binds `values` to the statement's parameters in order, straight through SQLite, for the statements that
    /// take hundreds of values (64 rows to a statement, `IN` lists of up to 512 users).
    ///
    /// GRDB's `StatementArguments` maps every value through a key path in unspecialised generic code and then
    /// matches the values to the parameters one by one: 11% of a burst's samples for these statements. The
    /// caller builds the SQL with exactly `values.count` parameters; a count that does not match throws, as
    /// GRDB's validation would, and nothing is executed.
    func bindPositionally(_ values: [DatabaseValue]) throws {
        guard values.count == Int(sqlite3_bind_parameter_count(sqliteStatement)) else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE,
                message: "wrong number of statement arguments: \(values.count)",
                sql: sql
            )
        }
        // Resets the statement and clears its bindings; with no arguments it binds nothing itself.
        setUncheckedArguments(StatementArguments())
        for (index, value) in zip(CInt(1)..., values) {
            let code: CInt
            switch value.storage {
            case .int64(let number): code = sqlite3_bind_int64(sqliteStatement, index, number)
            case .double(let number): code = sqlite3_bind_double(sqliteStatement, index, number)
            case .null: code = sqlite3_bind_null(sqliteStatement, index)
            case .string(var text):
                // The UTF-8 bytes in place (GRDB's binding makes a C string first), up to the first NUL as a C
                // string would end. Copied by SQLite; empty text is bound from a literal, since a nil pointer
                // would bind NULL.
                code = text.withUTF8 { bytes in
                    let length = bytes.firstIndex(of: 0) ?? bytes.count
                    guard let base = bytes.baseAddress, length > 0 else {
                        return sqlite3_bind_text(sqliteStatement, index, "", 0, Self.transient)
                    }
                    return base.withMemoryRebound(to: CChar.self, capacity: length) {
                        sqlite3_bind_text(sqliteStatement, index, $0, CInt(length), Self.transient)
                    }
                }
            case .blob: code = value.bind(to: sqliteStatement, at: index)
            }
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind argument", sql: sql)
            }
        }
    }

    /// SQLite's `SQLITE_TRANSIENT`: copy the bytes before the call returns.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
