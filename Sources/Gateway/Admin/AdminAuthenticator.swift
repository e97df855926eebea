import Engine
import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Who is calling the admin API: an operator (the configured bearer token, or an operator account's Basic
/// credentials, checked as users' are) or, on a tenant's routes, one of that tenant's admins.
final class AdminAuthenticator: Sendable {
    let users: Authenticator
    let store: any AdministrationStore
    let operatorToken: BearerToken?

    init(users: Authenticator, store: any AdministrationStore, operatorToken: String?) {
        self.users = users
        self.store = store
        self.operatorToken = operatorToken.map(BearerToken.init)
    }

    /// An operator, or a 401 problem.
    func operatorActor(
        _ request: Request,
        address: String?,
        requestID: String,
        logger: Logger
    ) async throws -> AdminActor {
        let field = request.headers[.authorization]
        if BearerToken.credentials(in: field) != nil {
            guard let operatorToken, operatorToken.matches(field) else { throw users.unauthorized("wrong token") }
            return AdminActor(role: .operator, name: "token", requestID: requestID)
        }
        guard let field, let (name, password) = Authenticator.parseBasic(field) else {
            throw users.unauthorized("credentials are required")
        }
        return try await operatorActor(
            name: name,
            password: password,
            address: address,
            requestID: requestID,
            logger: logger
        )
    }

    /// An operator account's credentials (the console's sign-in form): checked and throttled as Basic ones are.
    func operatorActor(
        name: String,
        password: String,
        address: String?,
        requestID: String,
        logger: Logger
    ) async throws -> AdminActor {
        let account = try await users.verify(
            username: name,
            password: password,
            key: LoginThrottle.UsernameKey(tenant: nil, username: name),
            address: address,
            logger: logger
        ) {
            try await store.operatorAccount(name: name).map { ($0, $0.passwordHash) }
        }
        return AdminActor(
            role: .operator,
            name: account.name,
            requestID: requestID,
            account: "operator-since-\(Int64(account.createdAt.timeIntervalSince1970 * 1000))"
        )
    }

    /// On `tenant`'s admin routes: an operator (a Basic name that is an operator account's is checked as one), or
    /// an enabled admin of the tenant; a suspended tenant's admins are refused.
    func tenantActor(
        _ request: Request,
        tenant: Tenant,
        address: String?,
        requestID: String,
        logger: Logger
    ) async throws -> AdminActor {
        let field = request.headers[.authorization]
        if BearerToken.credentials(in: field) != nil {
            return try await operatorActor(request, address: address, requestID: requestID, logger: logger)
        }
        if let field, let (name, _) = Authenticator.parseBasic(field),
            try await store.operatorAccount(name: name) != nil
        {
            return try await operatorActor(request, address: address, requestID: requestID, logger: logger)
        }
        let user = try await users.authenticate(field, tenant: tenant, address: address, logger: logger)
        return try Self.admin(user, of: tenant, requestID: requestID)
    }

    /// A tenant's admin route for a tenant that does not exist: answered as one whose credentials fail (401,
    /// after as long a check, and counted against the address's failed logins), except to an operator, who gets
    /// `notFound`. Whether a tenant id exists is nobody's business who cannot sign in to it (before, another
    /// tenant's admin got 401 for a tenant that exists and 404 for one that does not).
    func refuseUnknownTenant(
        _ request: Request,
        segment: String?,
        address: String?,
        requestID: String,
        logger: Logger,
        notFound: Problem
    ) async throws -> Never {
        let field = request.headers[.authorization]
        var isOperator = BearerToken.credentials(in: field) != nil
        if !isOperator, let field, let (name, _) = Authenticator.parseBasic(field) {
            isOperator = try await store.operatorAccount(name: name) != nil
        }
        if isOperator {
            _ = try await operatorActor(request, address: address, requestID: requestID, logger: logger)
            throw notFound
        }
        guard let segment, let id = try? TenantID(segment) else { throw notFound }
        // No user exists in a tenant that does not: the stand-in hash is checked, and the answer is the 401 a wrong
        // password gets.
        let standIn = try Tenant(id: id, name: segment, apnsTopic: "com.example.none")
        _ = try await users.authenticate(field, tenant: standIn, address: address, logger: logger)
        throw notFound
    }

    /// A tenant admin's credentials (the console's sign-in form): checked and throttled as Basic ones are.
    func tenantAdminActor(
        username: String,
        password: String,
        tenant: Tenant,
        address: String?,
        requestID: String,
        logger: Logger
    ) async throws -> AdminActor {
        let header = "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        let user = try await users.authenticate(header, tenant: tenant, address: address, logger: logger)
        return try Self.admin(user, of: tenant, requestID: requestID)
    }

    /// The actor of an enabled admin of a tenant that is not suspended, or a 403 problem.
    static func admin(_ user: User, of tenant: Tenant, requestID: String?) throws -> AdminActor {
        guard user.isAdmin else {
            throw Problem(.forbidden, "admin-required", "this needs an admin of the tenant")
        }
        guard !tenant.suspended else {
            throw Problem(.forbidden, "tenant-suspended", "the tenant is suspended")
        }
        return AdminActor(
            role: .tenantAdmin,
            name: user.username,
            tenant: tenant.id,
            requestID: requestID,
            account: "user-\(user.id.rawValue)"
        )
    }
}
