import Engine
import Foundation
import HummingbirdBcrypt
import NIOConcurrencyHelpers
import NIOPosix
import Testing

@testable import Gateway

/// New password hashes run on their own threads, in the tenants' turns, and leave with a caller that goes.
@Suite("Password hashing", .timeLimit(.minutes(2)))
struct PasswordHashingTests {
    @Test("One tenant's hundred waiting hashes delay another tenant's one by a single hash")
    func tenantsTakeTurns() async throws {
        let hashing = PasswordHashing(cost: 6, threads: 1)
        let finished = NIOLockedValueBox<[String]>([])
        let acme = try TenantID("acme")
        let globex = try TenantID("globex")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<100 {
                group.addTask {
                    _ = try await hashing.hash("pass-\(index)", tenant: acme)
                    finished.withLockedValue { $0.append("acme") }
                }
            }
            // Queued behind acme's hundred.
            #expect(try await eventually { hashing.waiting >= 90 })
            group.addTask {
                _ = try await hashing.hash("globex-pass", tenant: globex)
                finished.withLockedValue { $0.append("globex") }
            }
            try await group.waitForAll()
        }
        let order = finished.withLockedValue { $0 }
        let position = try #require(order.firstIndex(of: "globex"))
        // Acme's hashes done before globex's: those that ran before it was queued, and at most one more.
        #expect(position <= 100 - 90 + 2, "globex finished \(position + 1)th of \(order.count)")
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
