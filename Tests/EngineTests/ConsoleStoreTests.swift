import Foundation
import TestSupport
import Testing

@testable import Engine

/// What the console reads and ends in the store, on SQLite and PostgreSQL: sessions purged once idle past their
/// window or ended by a new password (in the password's transaction), and a tenant's devices counted by state.
@Suite("Console storage")
struct ConsoleStoreTests {
    func session(
        _ f: StoreFixture,
        _ role: AdminActor.Role,
        _ name: String,
        _ tenant: TenantID?,
        seen: Date
    ) async throws
        -> String
    {
        var (_, session) = ConsoleSessionPolicy.open(for: AdminActor(role: role, name: name, tenant: tenant), at: seen)
        session.lastSeenAt = seen
        try await f.store.createConsoleSession(session)
        return session.id
    }

    func alive(_ f: StoreFixture, _ ids: [String]) async throws -> [Bool] {
        var alive: [Bool] = []
        for id in ids { alive.append(try await f.store.consoleSession(id: id) != nil) }
        return alive
    }

    @Test(
        "Sessions: a new password ends the account's (only), ended ones are purged, sign out everywhere",
        arguments: StoreKind.allCases
    )
    func sessions(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let now = Date()
        let acmeA = try await session(f, .tenantAdmin, "a", f.acme, seen: now)
        let acmeA2 = try await session(f, .tenantAdmin, "a", f.acme, seen: now)
        let globexA = try await session(f, .tenantAdmin, "a", f.globex, seen: now)
        let acmeB = try await session(f, .tenantAdmin, "b", f.acme, seen: now)
        let ops = try await session(f, .operator, "ops", nil, seen: now)
        let stale = try await session(f, .tenantAdmin, "b", f.acme, seen: now.addingTimeInterval(-7200))
        let audit = AuditEntry(.commandLine, "user.password", tenant: f.acme, target: "user:a")
        // A change without a password keeps the sessions; a new password ends that account's, in that tenant.
        _ = try await f.store.updateUser(f.a, passwordHash: nil, audit: audit)
        #expect(try await alive(f, [acmeA, acmeA2]) == [true, true])
        _ = try await f.store.updateUser(f.a, passwordHash: "$2b$new", audit: audit)
        #expect(try await alive(f, [acmeA, acmeA2, globexA, acmeB, ops]) == [false, false, true, true, true])
        // An import that sets a password does the same.
        try await f.store.writeUsers([.update(f.b, password: nil, passwordHash: "$2b$other")], audit: [audit])
        #expect(try await alive(f, [acmeB, stale, globexA]) == [false, false, true])
        // Idle past the window: purged; seen since: kept.
        let idle = try await session(f, .tenantAdmin, "a", f.globex, seen: now.addingTimeInterval(-3600))
        #expect(try await f.store.purgeConsoleSessions(lastSeenBefore: now.addingTimeInterval(-1800)) == 1)
        #expect(try await alive(f, [idle, globexA, ops]) == [false, true, true])
        #expect(try await f.store.deleteConsoleSessions(role: .operator, name: "ops", tenant: nil) == 1)
        #expect(try await alive(f, [ops, globexA]) == [false, true])
    }

    @Test(
        "A tenant's devices are counted per topic and environment: registered, quarantined, removed",
        arguments: StoreKind.allCases
    )
    func deviceTallies(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        var sandbox = try f.device(f.a, token: String(repeating: "01", count: 32))
        sandbox.environment = .sandbox
        for device in [
            try f.device(f.a, token: String(repeating: "02", count: 32)),
            try f.device(f.b, token: String(repeating: "03", count: 32)),
            try f.device(f.b, token: String(repeating: "04", count: 32)),
            sandbox,
            try f.device(f.globexA, token: String(repeating: "05", count: 32)),
        ] {
            _ = try await f.store.registerDevice(device)
        }
        _ = try await f.store.applyTokenVerdicts(
            tenant: f.acme,
            topic: "t",
            [
                TokenVerdict(token: try DeviceToken(String(repeating: "03", count: 32)), kind: .quarantine(at: Date())),
                TokenVerdict(
                    token: try DeviceToken(String(repeating: "04", count: 32)),
                    kind: .remove(registeredBefore: .distantFuture)
                ),
            ]
        )
        let tallies = try await f.store.deviceTallies(tenant: f.acme)
        #expect(
            tallies == [
                DeviceTally(topic: "t", environment: .production, active: 1, quarantined: 1, removed: 1),
                DeviceTally(topic: "t", environment: .sandbox, active: 1, quarantined: 0, removed: 0),
            ]
        )
        #expect(
            try await f.store.deviceTallies(tenant: f.globex) == [
                DeviceTally(topic: "t", environment: .production, active: 1, quarantined: 0, removed: 0)
            ]
        )
    }

    @Test(
        "A device keeps its channel: an FCM token is stored as written, read back, pushed to and counted apart",
        arguments: StoreKind.allCases
    )
    func channels(_ kind: StoreKind) async throws {
        let f = try await StoreFixture.make(kind)
        let registration = "dQw4w9WgXcQ:APA91bH" + String(repeating: "x_Y-z", count: 28)
        let android = try Device(
            tenant: f.acme,
            topic: "t",
            token: DeviceToken(registration, channel: .fcm),
            owner: f.a.id,
            name: "Pixel",
            environment: .production,
            registeredAt: Date(timeIntervalSince1970: 1_800_000_000),
            channel: .fcm
        )
        #expect(try await f.store.registerDevice(android) == .created)
        _ = try await f.store.registerDevice(try f.device(f.a, token: String(repeating: "02", count: 32)))
        let devices = try await f.store.devices(tenant: f.acme, owner: f.a.id)
        #expect(Set(devices.map(\.channel)) == [.apns, .fcm])
        #expect(devices.first { $0.channel == .fcm }?.token.rawValue == registration)
        #expect(try await f.store.device(tenant: f.acme, topic: "t", token: android.token)?.channel == .fcm)
        let targets = try await f.store.pushTargets(tenant: f.acme, users: [f.a.id])
        #expect(Set(targets[f.a.id]?.devices.map(\.channel) ?? []) == [.apns, .fcm])
        #expect(
            try await f.store.deviceTallies(tenant: f.acme) == [
                DeviceTally(
                    channel: .apns,
                    topic: "t",
                    environment: .production,
                    active: 1,
                    quarantined: 0,
                    removed: 0
                ),
                DeviceTally(channel: .fcm, topic: "t", environment: .production, active: 1, quarantined: 0, removed: 0),
            ]
        )
    }
}
