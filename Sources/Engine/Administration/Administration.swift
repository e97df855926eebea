import Foundation

/// The rules of administration, one implementation for the command line and the admin API: who may do what to
/// which tenant, what a valid change is, and the audit entry every change commits with.
///
/// A tenant admin asking about another tenant, or about a tenant that does not exist, gets the same
/// `.unknownTenant`: nothing tells them the other tenant exists.
public struct Administration: Sendable {
    public typealias Store = AdministrationStore & TenantStore & UserStore & DeviceStore & LedgerStore & TimingStore
        & ReminderStore & CatalogStore & APNsCredentialStore & EngagementStore & WebhookStore

    /// Turns a password into the hash to store (bcrypt, done by the caller's layer), in the tenant's turn (nil: an
    /// operator account's).
    public typealias PasswordHasher = @Sendable (String, TenantID?) async throws -> String

    let store: any Store
    let hashPassword: PasswordHasher
    let now: @Sendable () -> Date

    public init(
        store: any Store,
        hashPassword: @escaping PasswordHasher,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.store = store
        self.hashPassword = hashPassword
        self.now = now
    }

    // MARK: Operators

    /// Adds an operator account (the first one from the command line; later ones by another operator).
    public func addOperator(name: String, password: String, by actor: AdminActor) async throws {
        try requireOperator(actor)
        try Self.validateOperatorName(name)
        try Self.validate(password: password)
        guard try await store.operatorAccount(name: name) == nil else {
            throw EngineError(.conflict, "operator \(name) already exists")
        }
        let account = OperatorAccount(name: name, passwordHash: try await hashPassword(password, nil), createdAt: now())
        try await store.createOperator(
            account,
            audit: AuditEntry(actor, "operator.create", tenant: nil, target: "operator:\(name)", at: now())
        )
    }

    public func operators(by actor: AdminActor) async throws -> [OperatorAccount] {
        try requireOperator(actor)
        return try await store.operatorAccounts()
    }

    // MARK: Tenants

    public func tenants(by actor: AdminActor) async throws -> [Tenant] {
        try requireOperator(actor)
        return try await store.tenants()
    }

    /// The tenant, if the actor may see it.
    public func tenant(_ id: TenantID, by actor: AdminActor) async throws -> Tenant {
        guard actor.mayAdminister(id), let tenant = try await store.tenant(id) else { throw Self.unknown(id) }
        return tenant
    }

    public func createTenant(_ id: TenantID, _ settings: TenantSettings, by actor: AdminActor) async throws -> Tenant {
        try requireOperator(actor)
        var tenant = try Tenant(id: id, name: settings.name ?? id.rawValue, createdAt: now())
        try settings.apply(to: &tenant, today: LocalDate(instant: now().timeIntervalSince1970, offsetSeconds: 0))
        guard try await store.tenant(id) == nil else { throw EngineError(.conflict, "tenant \(id) already exists") }
        try await store.createTenant(
            tenant,
            audit: AuditEntry(actor, "tenant.create", tenant: id, target: "tenant:\(id)", at: now())
        )
        return tenant
    }

    /// Changes the members `settings` gives; suspending or resuming is recorded as its own action. The tenant's
    /// admins change its programme (``TenantSettings/programmeOnly``); the rest is an operator's.
    public func updateTenant(_ id: TenantID, _ settings: TenantSettings, by actor: AdminActor) async throws -> Tenant {
        guard actor.mayAdminister(id) else { throw Self.unknown(id) }
        if actor.role != .operator, !settings.programmeOnly {
            throw EngineError(
                .forbidden,
                "a tenant's admins change its programme (language, time zone, delivery time, quiet hours, weekdays, "
                    + "maximum pushes per day, push expiry, first delivery); the rest needs an operator"
            )
        }
        guard var tenant = try await store.tenant(id) else { throw Self.unknown(id) }
        let before = tenant
        try settings.apply(to: &tenant, today: LocalDate(instant: now().timeIntervalSince1970, offsetSeconds: 0))
        // A form saved as it was (the console sends every field): nothing to write, audit or tell other nodes.
        guard tenant != before else { return tenant }
        let wasSuspended = before.suspended
        let action =
            switch (wasSuspended, tenant.suspended) {
            case (false, true): "tenant.suspend"
            case (true, false): "tenant.resume"
            default: "tenant.update"
            }
        try await store.updateTenant(
            tenant,
            audit: AuditEntry(actor, action, tenant: id, target: "tenant:\(id)", at: now())
        )
        return tenant
    }

    /// Erases the tenant and everything of it but its audit trail, its media folder too when given. `confirm` must
    /// repeat the tenant's id.
    public func deleteTenant(
        _ id: TenantID,
        confirm: String?,
        media: (any MediaStore)? = nil,
        by actor: AdminActor
    ) async throws -> ErasureReport {
        try requireOperator(actor)
        guard try await store.tenant(id) != nil else { throw Self.unknown(id) }
        guard confirm == id.rawValue else {
            throw EngineError(
                .invalidInput,
                "deleting a tenant erases all of its data: confirm with its id (confirm=\(id))"
            )
        }
        var report = try await store.deleteTenant(
            id,
            audit: AuditEntry(actor, "tenant.delete", tenant: id, target: "tenant:\(id)", at: now())
        )
        report.mediaFiles = try await media?.deleteAll(tenant: id) ?? 0
        return report
    }

    // MARK: Audit trail

    /// The trail, newest first: every tenant's for an operator (or one tenant's), the own tenant's for its admin.
    public func auditTrail(
        tenant: TenantID?,
        before: Int64?,
        limit: Int,
        by actor: AdminActor
    ) async throws -> [AuditEntry] {
        if let tenant {
            _ = try await self.tenant(tenant, by: actor)
        } else {
            try requireOperator(actor)
        }
        return try await store.auditEntries(tenant: tenant, before: before, limit: min(max(limit, 1), 500))
    }

    // MARK: Rules shared by the methods

    func requireOperator(_ actor: AdminActor) throws {
        guard actor.role == .operator else { throw EngineError(.forbidden, "this needs an operator") }
    }

    static func unknown(_ tenant: TenantID) -> EngineError {
        EngineError(.unknownTenant, "unknown tenant \(tenant)")
    }

    /// A password bcrypt can take whole: 1-72 bytes.
    public static func validate(password: String) throws(EngineError) {
        guard (1...72).contains(password.utf8.count) else {
            throw EngineError(.invalidInput, "a password must be 1-72 bytes")
        }
    }

    /// An operator's name: 1-64 characters of a-z, 0-9, '.', '_' and '-'.
    public static func validateOperatorName(_ name: String) throws(EngineError) {
        let allowed = name.utf8.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || [0x2E, 0x5F, 0x2D].contains($0)
        }
        guard (1...64).contains(name.utf8.count), allowed else {
            throw EngineError(.invalidInput, "an operator name must be 1-64 characters of a-z, 0-9, '.', '_' and '-'")
        }
    }
}
