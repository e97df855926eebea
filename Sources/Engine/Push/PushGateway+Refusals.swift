import Foundation
import Logging

/// What a channel refused, as an operator sees it: in the log at once, then once a minute, and in `/inspect`.
extension PushGateway {
    /// Notes refused pushes of one tenant, logging the first of a kind at once and the rest once a minute.
    func noteRefusals(_ tenant: TenantID, _ kinds: [String: Int]) {
        let now = Date()
        for (kind, count) in kinds {
            switch refusals.note(tenant: tenant, kind: kind, count: count, at: now) {
            case .first:
                logger.warning(
                    "push refused or failed; more of this kind are logged once a minute",
                    metadata: ["tenant.id": "\(tenant)", "push.reason": "\(kind)", "count": "\(count)"]
                )
            case .repeated(let total, let since):
                logger.warning(
                    "pushes refused or failed",
                    metadata: [
                        "tenant.id": "\(tenant)", "push.reason": "\(kind)", "count": "\(total)",
                        "in_last_s": "\(Int(since))",
                    ]
                )
            case nil: break
            }
        }
    }

    /// The kinds of refusal a tenant's pushes met in the last hour, most recent first (for inspection).
    public func recentRefusals(tenant: TenantID) -> [RefusalLog.Entry] {
        refusals.recent(tenant: tenant, at: Date())
    }
}
