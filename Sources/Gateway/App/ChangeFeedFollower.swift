import Engine
import Foundation
import Logging
import ServiceLifecycle

/// Reads the store's change feed and drops what this process's caches hold of changed users and catalogs. Every
/// `retention` it prunes the feed, purges devices marked gone and deletes console sessions that have ended.
///
/// Writes by this process update its caches directly; the feed brings those of admin commands and other
/// nodes, within one `interval`, or at once when the store announces them (PostgreSQL's `NOTIFY`).
struct ChangeFeedFollower: Service {
    let store: any ChangeFeedStore & DeviceStore & ConsoleSessionStore
    let caches: CacheInvalidation
    let interval: Duration
    let retention: Duration
    let logger: Logger

    func run() async throws {
        var position = try await store.latestChangeSequence()
        var lastPrune = ContinuousClock.now
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                // At most every 100 ms however often other nodes announce changes (a burst commits many times a
                // second), and at least every `interval`.
                let floor = min(interval, .milliseconds(100))
                try await cancelWhenGracefulShutdown {
                    try await Task.sleep(for: floor)
                    await store.waitForChanges(upTo: interval - floor)
                }
            } catch {
                return
            }
            do {
                var batch = try await store.changes(after: position, limit: 1000)
                while !batch.isEmpty {
                    for change in batch where change.origin != store.nodeID {
                        await caches.apply(change)
                    }
                    position = batch.last?.sequence ?? position
                    batch = batch.count == 1000 ? try await store.changes(after: position, limit: 1000) : []
                }
                if ContinuousClock.now - lastPrune > retention {
                    lastPrune = .now
                    let cutoff = Date().addingTimeInterval(-Double(retention.components.seconds))
                    _ = try await store.pruneChanges(before: cutoff)
                    await purgeGoneDevices(before: cutoff)
                    await purgeEndedSessions()
                }
            } catch {
                logger.warning(
                    "cannot read the change feed; caches may be stale until it recovers",
                    metadata: ["error": "\(error)"]
                )
            }
        }
    }

    /// Deletes the devices APNs' verdicts marked gone (invisible since) in bulk, well after the burst that marked
    /// them.
    private func purgeGoneDevices(before cutoff: Date) async {
        do {
            let purged = try await store.purgeRemovedDevices(before: cutoff)
            if purged > 0 { logger.info("purged devices APNs reported gone", metadata: ["devices": "\(purged)"]) }
        } catch {
            logger.warning(
                "cannot purge devices marked gone; they stay invisible, and the next round tries again",
                metadata: ["error": "\(error)"]
            )
        }
    }
}

extension ChangeFeedFollower {
    /// Deletes the console sessions idle for longer than a session may be (they let no one in already).
    func purgeEndedSessions() async {
        let idle = ConsoleSessionPolicy().idle
        do {
            let purged = try await store.purgeConsoleSessions(
                lastSeenBefore: Date().addingTimeInterval(-Double(idle.components.seconds))
            )
            if purged > 0 { logger.info("deleted ended console sessions", metadata: ["sessions": "\(purged)"]) }
        } catch {
            logger.warning(
                "cannot delete ended console sessions; the next round tries again",
                metadata: ["error": "\(error)"]
            )
        }
    }
}

/// What a change drops from this process's caches, in one place: the change feed follower applies the changes of
/// other processes, the admin API those of its own writes.
struct CacheInvalidation: Sendable {
    let authenticator: Authenticator
    /// Its ``DeliveryLedger/catalog`` is the process's one cache of tenants and impulses (the scheduler's, the
    /// push gateway's and every request's tenant).
    let ledger: DeliveryLedger
    /// This node's push gateway, if it pushes (the console's "deliver now" hands it the delivery).
    let gateway: PushGateway?
    var credentials: APNsCredentialLoader? = nil

    func apply(_ change: StoreChange) async {
        if change.subject == .apnsCredentials {
            await credentials?.reload(tenant: change.tenant)
            return
        }
        authenticator.invalidate(change)
        if change.subject == .catalog {
            // A catalog import, a change of the tenant's settings, a tenant created or deleted.
            ledger.catalog.forget(change.tenant)
        }
        await ledger.apply(change)
    }
}
