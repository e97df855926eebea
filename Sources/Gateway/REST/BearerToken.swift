/// A configured bearer token (the operator listener's, the admin API's operator token), checked without
/// telling a guesser anything by its timing.
struct BearerToken: Sendable {
    private let expected: [UInt8]

    init(_ token: String) { expected = Array(token.utf8) }

    /// The credentials of an `Authorization: Bearer <token>` field, or nil for another scheme. The scheme is
    /// case-insensitive (RFC 9110 section 11.1): `bearer` is as good as `Bearer`.
    static func credentials(in field: String?) -> String? {
        let parts = (field ?? "").split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }

    /// Whether the field carries this token; compared without an early exit, so the time taken does not tell how
    /// much of the token matched.
    func matches(_ field: String?) -> Bool {
        let given = Array((Self.credentials(in: field) ?? "").utf8)
        var difference = UInt8(given.count == expected.count ? 0 : 1)
        for index in expected.indices { difference |= expected[index] ^ (index < given.count ? given[index] : 0) }
        return difference == 0
    }
}
