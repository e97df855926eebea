import Foundation

/// Keeps the current provider token of one identity in a file, so a restarted broker (or another process on the
/// same data directory) reuses it instead of minting a new one: APNs answers 429 TooManyProviderTokenUpdates to
/// a key whose tokens change more often than every 20 minutes, and a crash loop would otherwise cause exactly that.
///
/// The file holds only the signed token (valid for an hour at most), never the key; it is written with mode 0600.
/// Reads and writes are small and happen once per token lifetime.
struct ProviderTokenFile: Sendable {
    let path: String

    init(directory: String, identity: APNsSigningIdentity) {
        let safe = { (text: String) in String(text.filter { $0.isLetter || $0.isNumber || $0 == "-" }.prefix(64)) }
        path = directory + "/apns-token-\(safe(identity.teamID))-\(safe(identity.keyID)).jwt"
    }

    /// The stored token if it was signed by this identity's key and is younger than `maximumAge`.
    func load(
        for identity: APNsSigningIdentity,
        now: Date,
        maximumAge: TimeInterval
    ) -> (token: String, issuedAt: Date)? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard
            let claims = try? ProviderJWT.verify(token, key: { $0 == identity.keyID ? identity.publicKey : nil }),
            claims.teamID == identity.teamID
        else { return nil }
        let age = now.timeIntervalSince(claims.issuedAt)
        guard age >= -60, age < maximumAge else { return nil }
        return (token, claims.issuedAt)
    }

    /// Best effort: a token that cannot be saved is still used; only a restart pays for it.
    func save(_ token: String) {
        let temporary = path + ".tmp"
        guard
            FileManager.default.createFile(
                atPath: temporary,
                contents: Data(token.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { return }
        _ = try? FileManager.default.replaceItemAt(
            URL(fileURLWithPath: path),
            withItemAt: URL(fileURLWithPath: temporary)
        )
        if FileManager.default.fileExists(atPath: temporary) { rename(temporary, path) }
    }
}
