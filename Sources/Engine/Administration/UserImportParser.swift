import Foundation

/// Reads an import file as it arrives, in parts: CSV (RFC 4180, a header naming the columns) or JSON lines (one
/// object per line, the members the admin API's user body takes). Pure: bytes in, rows out; a line longer than
/// `maxLineLength` is one rejected row, and memory holds one row at a time.
///
/// CSV columns: `username`, `password`, `passwordHash`, `language`, `timeZone`, `deliveryTime` (HH:mm),
/// `quietHours` (HH:mm-HH:mm), `weekdays` (1-7 separated by spaces or semicolons), `enabled`, `admin` (true or
/// false), and one per life area by its name (`work`, `health`, ...). An empty cell sets nothing.
public struct UserImportParser: Sendable {
    public enum Format: String, Sendable {
        case csv
        case jsonLines = "jsonl"
    }

    public let format: Format
    public let maxLineLength: Int
    private var header: [String]?
    private var field: [UInt8] = []
    private var fields: [String] = []
    private var quoted = false
    private var quoteSeen = false
    private var line = 1
    private var rowStart = 1
    private var tooLong = false
    private var rowBytes = 0
    private var atRowStart = true
    /// The first bytes, held while they may be UTF-8's byte-order mark (Excel writes one before a CSV).
    private var leading: [UInt8] = []
    private var pastStart = false
    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    public init(format: Format, maxLineLength: Int = 64 * 1024) {
        self.format = format
        self.maxLineLength = maxLineLength
    }

    /// Rows (or their errors) completed by `bytes`.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [Result<UserImportRow, UserImportRowError>] {
        var out: [Result<UserImportRow, UserImportRowError>] = []
        for byte in bytes {
            if pastStart {
                consume(byte, into: &out)
            } else {
                start(byte, into: &out)
            }
        }
        return out
    }

    /// Drops a byte-order mark at the start of the file, however the parts split it.
    private mutating func start(_ byte: UInt8, into out: inout [Result<UserImportRow, UserImportRowError>]) {
        leading.append(byte)
        if leading == Self.byteOrderMark {
            leading = []
            pastStart = true
        } else if !Self.byteOrderMark.starts(with: leading) {
            replayLeading(into: &out)
        }
    }

    private mutating func replayLeading(into out: inout [Result<UserImportRow, UserImportRowError>]) {
        pastStart = true
        let held = leading
        leading = []
        for byte in held { consume(byte, into: &out) }
    }

    /// The last row, when the file does not end with a line break; and a CSV without a header is an error.
    public mutating func finish() -> [Result<UserImportRow, UserImportRowError>] {
        var out: [Result<UserImportRow, UserImportRowError>] = []
        if !pastStart { replayLeading(into: &out) }
        if !atRowStart || !field.isEmpty || !fields.isEmpty { endRecord(into: &out) }
        if format == .csv, header == nil {
            out.append(
                .failure(
                    UserImportRowError(line: 1, reason: "the CSV has no header line naming its columns", fatal: true)
                )
            )
        }
        return out
    }

    private mutating func consume(_ byte: UInt8, into out: inout [Result<UserImportRow, UserImportRowError>]) {
        if atRowStart {
            atRowStart = false
            rowStart = line
            rowBytes = 0
        }
        rowBytes += 1
        if byte == UInt8(ascii: "\n") { line += 1 }
        if rowBytes > maxLineLength { tooLong = true }
        if format == .jsonLines || !quoted {
            if byte == UInt8(ascii: "\n") {
                endRecord(into: &out)
                return
            }
        }
        if tooLong { return }
        switch format {
        case .jsonLines:
            field.append(byte)
        case .csv:
            if quoted {
                if byte == UInt8(ascii: "\"") {
                    quoted = false
                    quoteSeen = true
                } else {
                    field.append(byte)
                }
            } else if byte == UInt8(ascii: "\"") {
                // A quote opening a field, or the second of a doubled quote inside one.
                if quoteSeen { field.append(byte) }
                quoted = true
            } else if byte == UInt8(ascii: ",") {
                fields.append(String(decoding: field, as: UTF8.self))
                field.removeAll(keepingCapacity: true)
                quoteSeen = false
            } else if byte != UInt8(ascii: "\r") {
                field.append(byte)
            }
        }
    }

    private mutating func endRecord(into out: inout [Result<UserImportRow, UserImportRowError>]) {
        defer {
            field.removeAll(keepingCapacity: true)
            fields.removeAll(keepingCapacity: true)
            quoted = false
            quoteSeen = false
            tooLong = false
            atRowStart = true
        }
        if tooLong {
            out.append(
                .failure(UserImportRowError(line: rowStart, reason: "the line is longer than \(maxLineLength) bytes"))
            )
            return
        }
        switch format {
        case .jsonLines:
            let text = field
            guard text.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return }
            out.append(Self.jsonRow(Data(text), line: rowStart))
        case .csv:
            fields.append(String(decoding: field, as: UTF8.self))
            if fields.count == 1, fields[0].trimmingCharacters(in: .whitespaces).isEmpty { return }
            guard let header else {
                let names = fields.map { $0.trimmingCharacters(in: .whitespaces) }
                let known = Set(Self.csvColumns + LifeArea.allCases.map(\.rawValue))
                let problem: String? =
                    if let unknown = names.first(where: { !known.contains($0) }) {
                        "unknown column '\(unknown)'"
                    } else if !names.contains("username") {
                        "the header has no username column"
                    } else if Set(names).count != names.count {
                        "a column is named twice"
                    } else {
                        nil
                    }
                if let problem {
                    out.append(.failure(UserImportRowError(line: rowStart, reason: problem, fatal: true)))
                }
                self.header = names
                return
            }
            guard fields.count == header.count else {
                out.append(
                    .failure(
                        UserImportRowError(
                            line: rowStart,
                            reason: "the row has \(fields.count) fields, the header \(header.count)"
                        )
                    )
                )
                return
            }
            out.append(Self.csvRow(Dictionary(uniqueKeysWithValues: zip(header, fields)), line: rowStart))
        }
    }

    static let csvColumns = [
        "username", "password", "passwordHash", "language", "timeZone", "deliveryTime", "quietHours", "weekdays",
        "enabled", "admin",
    ]

    static func csvRow(_ cells: [String: String], line: Int) -> Result<UserImportRow, UserImportRowError> {
        func value(_ name: String) -> String? {
            cells[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        do throws(EngineError) {
            func flag(_ name: String) throws(EngineError) -> Bool? {
                guard let text = value(name) else { return nil }
                switch text.lowercased() {
                case "true", "yes", "1": return true
                case "false", "no", "0": return false
                default: throw EngineError(.invalidInput, "\(name) must be true or false")
                }
            }
            guard let username = value("username") else { throw EngineError(.invalidInput, "username is missing") }
            var scores: [String: Int] = [:]
            for area in LifeArea.allCases {
                guard let text = value(area.rawValue) else { continue }
                guard let score = Int(text) else {
                    throw EngineError(.invalidInput, "\(area.rawValue) must be a score from 0 to 100")
                }
                scores[area.rawValue] = score
            }
            let weekdays = try value("weekdays").map { (text) throws(EngineError) -> Weekdays in
                let days = text.split(whereSeparator: { $0 == " " || $0 == ";" }).map { Int($0) ?? 0 }
                return try Weekdays(days)
            }
            let changes = UserChanges(
                language: value("language"),
                timeZone: value("timeZone"),
                deliveryTime: try value("deliveryTime").map { (text) throws(EngineError) in try LocalTime(parsing: text)
                },
                quietHours: try value("quietHours").map { (text) throws(EngineError) in try QuietHours(parsing: text) },
                weekdays: weekdays,
                lifeAreas: scores.isEmpty ? nil : scores,
                enabled: try flag("enabled"),
                admin: try flag("admin")
            )
            return .success(
                UserImportRow(
                    line: line,
                    username: username,
                    password: value("password"),
                    passwordHash: value("passwordHash"),
                    changes: changes
                )
            )
        } catch {
            return .failure(UserImportRowError(line: line, reason: error.message))
        }
    }

    private struct JSONRow: Decodable {
        var username: String
        var password: String?
        var passwordHash: String?
        var changes: UserChanges

        enum CodingKeys: String, CodingKey { case username, password, passwordHash }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            username = try container.decode(String.self, forKey: .username)
            password = try container.decodeIfPresent(String.self, forKey: .password)
            passwordHash = try container.decodeIfPresent(String.self, forKey: .passwordHash)
            changes = try UserChanges(from: decoder)
        }
    }

    static func jsonRow(_ data: Data, line: Int) -> Result<UserImportRow, UserImportRowError> {
        do {
            guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                return .failure(UserImportRowError(line: line, reason: "the line is not a JSON object"))
            }
            let known = Set(["username", "password", "passwordHash", "lifeAreas"] + UserChanges.memberNames)
            if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                return .failure(UserImportRowError(line: line, reason: "unknown member '\(unknown)'"))
            }
            if let member = object.first(where: { $0.value is NSNull })?.key {
                return .failure(UserImportRowError(line: line, reason: "\(member) must not be null"))
            }
            let row = try JSONDecoder().decode(JSONRow.self, from: data)
            return .success(
                UserImportRow(
                    line: line,
                    username: row.username,
                    password: row.password,
                    passwordHash: row.passwordHash,
                    changes: row.changes
                )
            )
        } catch let error as EngineError {
            return .failure(UserImportRowError(line: line, reason: error.message))
        } catch let DecodingError.keyNotFound(key, _) {
            return .failure(UserImportRowError(line: line, reason: "\(key.stringValue) is missing"))
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return .failure(UserImportRowError(line: line, reason: "\(path) has the wrong type"))
        } catch let DecodingError.dataCorrupted(context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            let reason = (context.underlyingError as? EngineError)?.message ?? "\(path) is invalid"
            return .failure(UserImportRowError(line: line, reason: reason))
        } catch {
            return .failure(UserImportRowError(line: line, reason: "the line is not valid JSON"))
        }
    }
}

extension UserChanges {
    /// The JSON members a change takes (for refusing unknown ones in imports).
    static let memberNames = ["language", "timeZone", "deliveryTime", "quietHours", "weekdays", "enabled", "admin"]
}
