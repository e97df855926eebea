import Foundation

/// Reads a SCIM filter: a tokenizer and a recursive-descent parser, `or` binding looser than `and` (RFC 7644,
/// section 3.4.2.2).
struct SCIMFilterParser {
    enum Token: Equatable {
        case open, close, openBracket, closeBracket
        case word(String)
        case string(String)
    }

    var tokens: [Token]
    var position = 0

    var atEnd: Bool { position >= tokens.count }

    func describeNext() -> String {
        guard position < tokens.count else { return "the end" }
        switch tokens[position] {
        case .open: return "'('"
        case .close: return "')'"
        case .openBracket: return "'['"
        case .closeBracket: return "']'"
        case .word(let word): return "'\(word)'"
        case .string: return "a string"
        }
    }

    static func tokenize(_ text: String) throws(SCIMFilterError) -> [Token] {
        var tokens: [Token] = []
        let characters = Array(text.unicodeScalars)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            switch character {
            case " ", "\t", "\n", "\r":
                index += 1
            case "(":
                tokens.append(.open)
                index += 1
            case ")":
                tokens.append(.close)
                index += 1
            case "[":
                tokens.append(.openBracket)
                index += 1
            case "]":
                tokens.append(.closeBracket)
                index += 1
            case "\"":
                // A JSON string: read to the closing quote that is not escaped, then decoded as JSON.
                var end = index + 1
                var escaped = false
                while end < characters.count, escaped || characters[end] != "\"" {
                    escaped = !escaped && characters[end] == "\\"
                    end += 1
                }
                guard end < characters.count else { throw SCIMFilterError("a string is not closed") }
                var literal = String.UnicodeScalarView()
                literal.append(contentsOf: characters[index...end])
                guard let value = try? JSONDecoder().decode(String.self, from: Data(String(literal).utf8)) else {
                    throw SCIMFilterError("a string is not valid JSON")
                }
                tokens.append(.string(value))
                index = end + 1
            default:
                var end = index
                while end < characters.count, !" \t\n\r()[]\"".unicodeScalars.contains(characters[end]) { end += 1 }
                var word = String.UnicodeScalarView()
                word.append(contentsOf: characters[index..<end])
                tokens.append(.word(String(word)))
                index = end
            }
        }
        guard !tokens.isEmpty else { throw SCIMFilterError("the filter is empty") }
        return tokens
    }

    mutating func parseFilter(depth: Int) throws(SCIMFilterError) -> SCIMFilter {
        guard depth <= SCIMFilter.maximumDepth else { throw SCIMFilterError("the filter nests too deeply") }
        var left = try parseAnd(depth: depth)
        while keyword("or") { left = .or(left, try parseAnd(depth: depth)) }
        return left
    }

    mutating func parseAnd(depth: Int) throws(SCIMFilterError) -> SCIMFilter {
        var left = try parseUnary(depth: depth)
        while keyword("and") { left = .and(left, try parseUnary(depth: depth)) }
        return left
    }

    mutating func parseUnary(depth: Int) throws(SCIMFilterError) -> SCIMFilter {
        if keyword("not") {
            try expect(.open, "'(' after not")
            let inner = try parseFilter(depth: depth + 1)
            try expect(.close, "')'")
            return .not(inner)
        }
        if next == .open {
            position += 1
            let inner = try parseFilter(depth: depth + 1)
            try expect(.close, "')'")
            return inner
        }
        let path = try parsePath()
        if next == .openBracket {
            position += 1
            guard path.count == 1 else { throw SCIMFilterError("a bracket filter must follow a top-level attribute") }
            let inner = try parseFilter(depth: depth + 1)
            try expect(.closeBracket, "']'")
            // Entra ID's and Okta's form: `emails[type eq "work"].value eq "..."`.
            if case .word(let word) = next, word.hasPrefix("."), word.count > 1 {
                position += 1
                let sub = String(word.dropFirst())
                return .valuePath(attribute: path[0], filter: inner, then: try parseTest(path: [sub]))
            }
            return .valuePath(attribute: path[0], filter: inner, then: nil)
        }
        return try parseTest(path: path)
    }

    /// `pr`, or an operator and a value, after `path`.
    mutating func parseTest(path: [String]) throws(SCIMFilterError) -> SCIMFilter {
        guard case .word(let word) = next else {
            throw SCIMFilterError("expected an operator, found \(describeNext())")
        }
        position += 1
        if word.lowercased() == "pr" { return .present(path: path) }
        guard let op = SCIMFilter.Operator(rawValue: word.lowercased()) else {
            throw SCIMFilterError("'\(word)' is not an operator (eq, ne, co, sw, ew, gt, ge, lt, le, pr)")
        }
        guard position < tokens.count else { throw SCIMFilterError("expected a value after \(word)") }
        let token = tokens[position]
        position += 1
        switch token {
        case .string(let value): return .compare(path: path, op: op, value: .string(value))
        case .word(let value):
            switch value.lowercased() {
            case "true": return .compare(path: path, op: op, value: .bool(true))
            case "false": return .compare(path: path, op: op, value: .bool(false))
            case "null": return .compare(path: path, op: op, value: .null)
            default:
                guard let number = Double(value), number.isFinite else {
                    throw SCIMFilterError("'\(value)' is not a value (a quoted string, a number, true, false or null)")
                }
                return .compare(path: path, op: op, value: .number(number))
            }
        default:
            throw SCIMFilterError("expected a value after \(word)")
        }
    }

    /// An attribute path: `name` or `name.sub`, with its schema's URN before it when it names one
    /// (`urn:...:core:2.0:User:userName` is `userName`; an extension's attributes stay under its URN, as in the
    /// resource: `urn:...:enterprise:2.0:User:manager.value`).
    mutating func parsePath() throws(SCIMFilterError) -> [String] {
        guard case .word(let word) = next else {
            throw SCIMFilterError("expected an attribute, found \(describeNext())")
        }
        position += 1
        var attribute = Substring(word)
        var schema: [String] = []
        if word.lowercased().hasPrefix("urn:"), let colon = word.lastIndex(of: ":") {
            attribute = word[word.index(after: colon)...]
            let urn = String(word[..<colon])
            if urn.lowercased() != Self.coreUserSchema { schema = [urn] }
        }
        let path = attribute.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard (1...2).contains(path.count),
            path.allSatisfy({ part in
                guard let first = part.unicodeScalars.first, CharacterSet.letters.contains(first) else { return false }
                return part.unicodeScalars.allSatisfy {
                    CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-" || $0 == "$"
                }
            })
        else { throw SCIMFilterError("'\(word)' is not an attribute path") }
        return schema + path
    }

    static let coreUserSchema = "urn:ietf:params:scim:schemas:core:2.0:user"

    var next: Token? { position < tokens.count ? tokens[position] : nil }

    mutating func keyword(_ name: String) -> Bool {
        guard case .word(let word) = next, word.lowercased() == name else { return false }
        position += 1
        return true
    }

    mutating func expect(_ token: Token, _ what: String) throws(SCIMFilterError) {
        guard next == token else { throw SCIMFilterError("expected \(what), found \(describeNext())") }
        position += 1
    }
}
