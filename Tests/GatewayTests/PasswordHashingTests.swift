import Engine
import Foundation
import HummingbirdBcrypt
import NIOConcurrencyHelpers
import NIOPosix
import TestSupport
import Testing

@testable import Gateway

/// New password hashes run on their own threads, in the tenants' turns, and leave with a caller that goes.
@Suite("Password hashing", .timeLimit(.minutes(2)))
struct PasswordHashingTests {
    @Test("One tenant's hundred waiting hashes delay another tenant's one by a single hash")
    func tenantsTakeTurns() async throws {
        // The first hash waits until the test lets it go, so that everything below is queued behind it.
        let gate = NIOLockedValueBox(false)
        let held = NIOLockedValueBox(false)
        let order = NIOLockedValueBox<[String]>([])
        let hashing = PasswordHashing(cost: 4, threads: 1) { password, _ in
            if password == "gate" {
                held.withLockedValue { $0 = true }
                while !gate.withLockedValue({ $0 }) { usleep(1_000) }
            }
            order.withLockedValue { $0.append(password) }
            return "hash of " + password
        }
        let acme = try TenantID("acme")
        let globex = try TenantID("globex")
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { _ = try await hashing.hash("gate", tenant: acme) }
            #expect(try await eventually { held.withLockedValue { $0 } })
            for index in 0..<100 { group.addTask { _ = try await hashing.hash("acme-\(index)", tenant: acme) } }
            #expect(try await eventually { hashing.waiting == 100 })
            group.addTask { _ = try await hashing.hash("globex", tenant: globex) }
            #expect(try await eventually { hashing.waiting == 101 })
            gate.withLockedValue { $0 = true }
            try await group.waitForAll()
        }
        let done = order.withLockedValue { $0 }
        // The held hash, one of acme's, then globex's: not after acme's hundred.
        #expect(done.count == 102 && done.firstIndex(of: "globex") == 2, "\(done.prefix(5))")
    }

    @Test("Hashes go on while every thread of the shared pool (file and DNS work) is blocked")
    func ownThreads() async throws {
        let hashing = PasswordHashing(cost: 4, threads: 1)
        let release = NIOLockedValueBox(false)
        let started = NIOLockedValueBox(0)
        let threads = NIOThreadPool.singleton.numberOfThreads
        let blockers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<threads {
                    group.addTask {
                        try await NIOThreadPool.singleton.runIfActive {
                            started.withLockedValue { $0 += 1 }
                            while !release.withLockedValue({ $0 }) { usleep(1_000) }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        defer { release.withLockedValue { $0 = true } }
        // Every shared thread is held now.
        #expect(try await eventually { started.withLockedValue { $0 } == threads })
        let hash = try await hashing.hash("own-threads", tenant: nil)
        #expect(Bcrypt.verify("own-threads", hash: hash))
        release.withLockedValue { $0 = true }
        try await blockers.value
    }

    @Test("A caller that goes takes its waiting hashes with it")
    func cancelled() async throws {
        let hashing = PasswordHashing(cost: 8, threads: 1)
        let acme = try TenantID("acme")
        let task = Task {
            try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<50 { group.addTask { try await hashing.hash("p\(index)", tenant: acme) } }
                try await group.waitForAll()
            }
        }
        #expect(try await eventually { hashing.waiting >= 40 })
        task.cancel()
        #expect(try await eventually { hashing.waiting == 0 })
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}
