import Crypto
import Foundation
import Synchronization

/// Tokens already judged, by their SHA-256 under the tenant and issuer, so that a busy app does not pay a signature
/// check on every request and a client repeating a bad token costs a hash, not a verification (issue 46, item 2).
///
/// An accepted token is remembered until its `exp` (a judgement never outlives the token); a refused one for
/// `refusalTTL`, and only for refusals that time cannot change (a bad signature, a wrong issuer or audience, a
/// malformed token or an algorithm not accepted): an unknown key id or an unreachable provider is judged again. At
/// most `capacity` entries: expired ones go first, then everything (the cache refills from verifications).
/// What the token grants is decided after this: a deactivated user is refused whatever the cache holds.
public final class IdentityTokenCache: Sendable {
    enum Judgement: Sendable {
        case accepted(VerifiedIdentityToken)
        case refused(IdentityTokenError)
    }

    struct Entry: Sendable {
        var judgement: Judgement
        var until: Date
    }

    static let lasting: Set<IdentityTokenError.Code> = [
        .malformed, .unsupportedAlgorithm, .badSignature, .wrongIssuer, .wrongAudience,
    ]

    private let entries = Mutex<[Data: Entry]>([:])
    let capacity: Int
    let refusalTTL: TimeInterval

    public init(capacity: Int = 100_000, refusalTTL: TimeInterval = 300) {
        self.capacity = capacity
        self.refusalTTL = refusalTTL
    }

    /// The token's hash under the tenant and everything its policy checks (a tenant that changes its issuer or
    /// clients has its tokens judged again).
    static func key(_ token: String, tenant: String, policy: IdentityTokenPolicy) -> Data {
        var hasher = SHA256()
        for part in [tenant, policy.issuer, policy.audiences.sorted().joined(separator: " "), "\(policy.skew)"] {
            hasher.update(data: Data(part.utf8))
            hasher.update(data: [0])
        }
        hasher.update(data: Data(token.utf8))
        return Data(hasher.finalize())
    }

    /// The judgement of `token` if one holds at `now`: the verified token, or the refusal thrown.
    func lookup(_ key: Data, now: Date) throws(IdentityTokenError) -> VerifiedIdentityToken? {
        guard let entry = entries.withLock({ $0[key] }), now < entry.until else { return nil }
        switch entry.judgement {
        case .accepted(let token): return token
        case .refused(let error): throw error
        }
    }

    func remember(_ key: Data, _ result: Result<VerifiedIdentityToken, IdentityTokenError>, now: Date) {
        let entry: Entry
        switch result {
        case .success(let token):
            entry = Entry(judgement: .accepted(token), until: token.expiresAt)
        case .failure(let error):
            guard Self.lasting.contains(error.code) else { return }
            entry = Entry(judgement: .refused(error), until: now.addingTimeInterval(refusalTTL))
        }
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value.until > now }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = entry
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
