import Foundation

/// Who performs an administrative action, as the audit trail records it.
public struct AdminActor: Sendable, Equatable {
    public enum Role: String, Sendable, Codable {
        /// Node-wide: every tenant (an operator account, the configured bearer token, or the command line).
        case `operator`
        /// One tenant's programme administrator (a user added with `--admin`).
        case tenantAdmin = "tenant-admin"
    }

    public var role: Role
    /// The operator account's name (`token` for the bearer token, `cli` for a command), or the admin's username.
    public var name: String
    /// The tenant a tenant admin belongs to.
    public var tenant: TenantID?
    /// The HTTP request's id (`X-Request-ID` or the broker's own), nil for a command.
    public var requestID: String?
    /// Which account this is, beyond its name: a user's id, an operator account's creation. An account deleted and
    /// made again under the same name is another account (its `Idempotency-Key`s are its own).
    public var account: String?

    public init(role: Role, name: String, tenant: TenantID? = nil, requestID: String? = nil, account: String? = nil) {
        self.role = role
        self.name = name
        self.tenant = tenant
        self.requestID = requestID
        self.account = account
    }

    /// The command line, run by whoever can read the store.
    public static let commandLine = AdminActor(role: .operator, name: "cli")

    /// Whether the actor may administer `tenant`: an operator may administer any, a tenant admin only their own.
    public func mayAdminister(_ tenant: TenantID) -> Bool {
        role == .operator || self.tenant == tenant
    }
}

/// One line of the audit trail: who did what to which target, when, in answer to which request. Never a secret:
/// targets name tenants, usernames, impulses and key ids, not passwords, keys or tokens.
public struct AuditEntry: Sendable, Equatable {
    /// Assigned by the store (0 before).
    public var id: Int64
    public var at: Date
    public var actor: String
    public var role: AdminActor.Role
    /// The tenant the action concerns (nil for node-wide actions such as adding an operator).
    public var tenant: TenantID?
    /// What was done, as `noun.verb`: `tenant.create`, `user.delete`, ...
    public var action: String
    /// What it was done to: `tenant:acme`, `user:alice`, `operator:ops`.
    public var target: String
    public var requestID: String?

    public init(
        id: Int64 = 0,
        at: Date,
        actor: String,
        role: AdminActor.Role,
        tenant: TenantID?,
        action: String,
        target: String,
        requestID: String?
    ) {
        self.id = id
        self.at = at
        self.actor = actor
        self.role = role
        self.tenant = tenant
        self.action = action
        self.target = target
        self.requestID = requestID
    }

    /// The entry for `actor` doing `action` to `target` now.
    public init(_ actor: AdminActor, _ action: String, tenant: TenantID?, target: String, at: Date = Date()) {
        self.init(
            at: at,
            actor: actor.name,
            role: actor.role,
            tenant: tenant,
            action: action,
            target: target,
            requestID: actor.requestID
        )
    }
}
