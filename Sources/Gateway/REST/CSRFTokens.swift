import Crypto
import Engine
import Foundation

/// Tokens that tie a `/SendPush` form to the admin it was served to, so that another site cannot make the admin's
/// browser post one (its Basic credentials would go along).
///
/// A token is `<issued epoch seconds>.<HMAC-SHA256 of tenant, user and issue time>` under a key of this process;
/// it is valid for `lifetime`. Nothing is stored.
final class CSRFTokens: Sendable {
    private let key = SymmetricKey(size: .bits256)
    let lifetime: TimeInterval

    init(lifetime: TimeInterval = 12 * 3600) {
        self.lifetime = lifetime
    }

    func token(tenant: TenantID, user: UserID, now: Date = Date()) -> String {
        let issued = Int64(now.timeIntervalSince1970)
        return "\(issued)."
            + mac(tenant: tenant, user: user, issued: issued).map { String(format: "%02x", $0) }.joined()
    }

    func isValid(_ token: String?, tenant: TenantID, user: UserID, now: Date = Date()) -> Bool {
        guard let token, let dot = token.firstIndex(of: "."), let issued = Int64(token[..<dot]) else { return false }
        let age = now.timeIntervalSince1970 - TimeInterval(issued)
        guard age >= -60, age <= lifetime else { return false }
        let hex = token[token.index(after: dot)...]
        guard hex.utf8.count == 64 else { return false }
        var given = [UInt8]()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return false }
            given.append(byte)
            index = next
        }
        let expected = mac(tenant: tenant, user: user, issued: issued)
        return given.count == expected.count && zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func mac(tenant: TenantID, user: UserID, issued: Int64) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Data("\(tenant)\n\(user)\n\(issued)".utf8), using: key))
    }
}
