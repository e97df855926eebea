import Foundation
import TestSupport
import Testing

@testable import Engine

/// What each write owes besides its rows (webhook events, audit entries, change-feed entries) is declared once in
/// `StoreDuties`; both stores must carry out exactly that, in the same transaction.
@Suite("Store duties: each write's events, audit and changes, on both stores", .timeLimit(.minutes(3)))
struct StoreDutiesTests {
    /// What a write left behind, as another process sees it.
    struct Observed: Equatable, CustomStringConvertible {
        var events: [String] = []
        var audit: [String] = []
        var changes: [StoreChange.Subject] = []

        init(events: [String] = [], audit: [String] = [], changes: [StoreChange.Subject] = []) {
            (self.events, self.audit, self.changes) = (events, audit, changes)
        }

        init(_ duties: StoreDuties) {
            events = duties.events.map(\.event.rawValue)
            audit = duties.audit.map(\.action)
            changes = duties.changes.map(\.subject)
        }

        var description: String { "events \(events), audit \(audit), changes \(changes)" }
    }

    /// The store's outbox, audit trail and change feed, read after each write.
    struct Watcher {
        let f: StoreFixture
        var events = 0
        var audit = 0
        var sequence: Int64 = 0

        init(_ f: StoreFixture) async throws {
            self.f = f
            sequence = try await f.store.latestChangeSequence()
        }

        mutating func next() async throws -> Observed {
            let events = try await f.texts("SELECT event FROM webhook_outbox ORDER BY id").compactMap {
                $0.first ?? nil
            }
            let audit = try await f.store.auditEntries(tenant: nil, before: nil, limit: 1000).reversed().map(\.action)
            let changes = try await f.store.changes(after: sequence, limit: 1000)
            defer {
                (self.events, self.audit) = (events.count, audit.count)
                sequence = changes.last?.sequence ?? sequence
            }
            return Observed(
                events: Array(events.dropFirst(self.events)),
                audit: Array(audit.dropFirst(self.audit)),
                changes: changes.map(\.subject)
            )
        }
    }

    func audit(_ action: String, _ tenant: TenantID?) -> AuditEntry {
        AuditEntry(.commandLine, action, tenant: tenant, target: action)
    }

    @Test("Every kind of write leaves exactly its declared duties", arguments: StoreKind.allCases)
    func declared(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let store = f.store
        var watcher = try await Watcher(f)
        func expect(
            _ expected: Observed,
            _ step: String,
            sourceLocation: SourceLocation = #_sourceLocation
        )
            async throws
        {
            let observed = try await watcher.next()
            #expect(observed == expected, "\(step): \(observed)", sourceLocation: sourceLocation)
        }

        let endpointAudit = audit("webhook.create", f.acme)
        try await store.createWebhookEndpoint(
            WebhookEndpoint(
                id: "hook",
                tenant: f.acme,
                url: "https://receiver.example/hook",
                events: Set(WebhookEvent.allCases),
                secret: "s",
                createdAt: Date()
            ),
            audit: endpointAudit
        )
        try await expect(Observed(.audited(endpointAudit)), "an endpoint")

        let tenantAudit = audit("tenant.create", nil)
        let initech = try Tenant(id: TenantID("initech"), name: "Initech", apnsTopic: "t")
        try await store.createTenant(initech, audit: tenantAudit)
        try await expect(Observed(.tenantChanged(initech.id, audit: tenantAudit)), "a tenant")

        let userAudit = audit("user.create", f.acme)
        let carol = try await store.createUser(
            try NewUser(tenant: f.acme, username: "carol", passwordHash: "x"),
            audit: userAudit
        )
        try await expect(Observed(.usersCreated([carol], audit: [userAudit])), "a user")

        var changed = carol
        changed.language = "DE"
        let updateAudit = audit("user.update", f.acme)
        _ = try await store.updateUser(changed, passwordHash: nil, audit: updateAudit)
        try await expect(Observed(.userChanged(changed, audit: updateAudit)), "a user's settings")

        _ = try await store.setPassword(tenant: f.acme, username: "carol", passwordHash: "y")
        try await expect(Observed(.credentialsChanged(tenant: f.acme, username: "carol")), "a password")

        try await store.setLifeAreas(tenant: f.acme, user: carol.id, scores: .neutral)
        try await expect(Observed(.profileChanged(tenant: f.acme, user: carol.id)), "life areas")

        let deliveryAudit = audit("delivery.create", f.acme)
        let recorded = try await store.recordDeliveries(
            [
                NewDelivery(
                    tenant: f.acme,
                    user: carol.id,
                    impulse: try ImpulseID("one"),
                    kind: .manual,
                    assignedAt: Date()
                )
            ],
            audit: deliveryAudit
        )
        try await expect(Observed(.deliveriesRecorded(recorded, audit: deliveryAudit)), "a delivery")

        let delivery = try #require(recorded.first)
        try await store.applyMarks([DeliveryMark(tenant: f.acme, delivery: delivery.id, kind: .read, at: Date())])
        try await expect(
            Observed(events: ["delivery.read"], changes: [.ledger(carol.id)]),
            "a read (its event built from the changed row)"
        )

        let retireAudit = audit("impulse.retire", f.acme)
        try await store.setImpulseRetired(tenant: f.acme, impulse: ImpulseID("two"), retired: true, audit: retireAudit)
        try await expect(Observed(.tenantChanged(f.acme, audit: retireAudit)), "an impulse retired")

        let device = try f.device(carol)
        _ = try await store.registerDevice(device)
        try await expect(Observed(), "a device registered")
        _ = try await store.unregisterDevice(tenant: f.acme, topic: device.topic, token: device.token, owner: carol.id)
        try await expect(
            Observed(
                .devicesRemoved(
                    tenant: f.acme,
                    [(carol.id.rawValue, device.token.rawValue)],
                    usernames: [:],
                    reason: ""
                )
            ),
            "a device unregistered"
        )

        // Tokens a push service called dead: each event names the service, `apns` or `fcm`.
        let iPhone = try f.device(carol, token: String(repeating: "cd", count: 32))
        let android = try f.device(carol, token: "fcm-token:" + String(repeating: "x", count: 140), channel: .fcm)
        for device in [iPhone, android] { _ = try await store.registerDevice(device) }
        _ = try await watcher.next()
        let dead = [iPhone, android].map {
            TokenVerdict(token: $0.token, kind: .remove(registeredBefore: .distantFuture))
        }
        #expect(try await store.applyTokenVerdicts(tenant: f.acme, topic: "t", dead) == [true, true])
        let reasons = try await f.texts("SELECT data FROM webhook_outbox WHERE event = 'device.removed' ORDER BY id")
            .compactMap { $0.first ?? nil }.suffix(2)
        #expect(reasons.filter { $0.contains(#""reason":"apns""#) && $0.contains(iPhone.token.rawValue) }.count == 1)
        #expect(reasons.filter { $0.contains(#""reason":"fcm""#) && $0.contains(android.token.rawValue) }.count == 1)
        _ = try await watcher.next()

        let eraseAudit = audit("user.delete", f.acme)
        _ = try await store.deleteUser(tenant: f.acme, user: carol.id, audit: eraseAudit)
        try await expect(
            Observed(.userDeleted(tenant: f.acme, user: carol.id, username: "carol", audit: eraseAudit)),
            "a user erased"
        )

        let deleteAudit = audit("tenant.delete", initech.id)
        _ = try await store.deleteTenant(initech.id, audit: deleteAudit)
        try await expect(Observed(.tenantDeleted(initech.id, audit: deleteAudit)), "a tenant erased")
    }
}
