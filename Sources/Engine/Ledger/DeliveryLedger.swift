import Foundation
import Logging

/// The push gateway's outcome for one delivery: pushed (a push service accepted it under `apnsID`, on
/// `channels`) or settled without an accepted push (no device, every device rejected).
public struct PushSettlement: Sendable, Equatable {
    public var tenant: TenantID
    public var user: UserID
    public var delivery: DeliveryID
    public var apnsID: String?
    /// The channels whose push was accepted (with `apnsID`).
    public var channels: PushChannels
    /// Settled because the user had no device (the reports tell it from a failed push).
    public var noDevice: Bool
    /// Set when the delivery is pushed device by device (``DeliveryMark/Kind/progress``): the devices whose
    /// outcome this settlement records, and whether every device of the user now has one.
    public var progress: (devices: [String], settles: Bool)?

    public init(
        tenant: TenantID,
        user: UserID,
        delivery: DeliveryID,
        apnsID: String?,
        channels: PushChannels = [],
        noDevice: Bool = false,
        progress: (devices: [String], settles: Bool)? = nil
    ) {
        self.tenant = tenant
        self.user = user
        self.delivery = delivery
        self.apnsID = apnsID
        self.channels = channels
        self.noDevice = noDevice
        self.progress = progress
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        (lhs.tenant, lhs.user, lhs.delivery, lhs.apnsID, lhs.channels, lhs.noDevice)
            == (rhs.tenant, rhs.user, rhs.delivery, rhs.apnsID, rhs.channels, rhs.noDevice)
            && lhs.progress?.devices == rhs.progress?.devices && lhs.progress?.settles == rhs.progress?.settles
    }

    /// The mark it makes in the ledger.
    func mark(at now: Date) -> DeliveryMark {
        let kind: DeliveryMark.Kind =
            if let progress {
                .progress(apnsID: apnsID, channels: channels, devices: progress.devices, settles: progress.settles)
            } else {
                apnsID.map { .pushed(apnsID: $0, channels: channels) } ?? (noDevice ? .noDevice : .settled)
            }
        return DeliveryMark(tenant: tenant, delivery: delivery, kind: kind, at: now)
    }
}

/// A page of a user's deliveries.
public struct LedgerPage: Sendable {
    /// Newest first.
    public var items: [DeliveredImpulse]
    public var unreadCount: Int
}

/// The per-user delivery ledger, sharded so that users never contend with each other.
///
/// Assignments are written before anything is pushed; fetched and read marks go through group commit.
/// Hot reads (the first page, the unread count) are answered from the shard's memory.
public final class DeliveryLedger: Sendable {
    private let store: any DeliveryLedgerStore
    /// Tenants and impulses: the process's one cache of them, which the push gateway and the scheduler share.
    public let catalog: CatalogCache
    private let shards: [LedgerShard]
    private let writer: MarkWriter
    private let metrics: BrokerMetrics

    public init(
        store: any DeliveryLedgerStore,
        catalog: CatalogCache,
        configuration: LedgerConfiguration = .init(),
        metrics: BrokerMetrics = .disabled,
        logger: Logger? = nil
    ) {
        self.store = store
        self.catalog = catalog
        self.metrics = metrics
        let writer = MarkWriter(store: store, metrics: metrics, logger: logger)
        self.writer = writer
        self.shards = (0..<configuration.shardCount).map { _ in
            LedgerShard(store: store, catalog: catalog, writer: writer, configuration: configuration)
        }
    }

    private func shardIndex(_ user: UserID) -> Int {
        Int(UInt64(bitPattern: user.rawValue) % UInt64(shards.count))
    }

    private func shard(_ user: UserID) -> LedgerShard {
        shards[shardIndex(user)]
    }

    /// Records assignments durably in one transaction and returns the rows that were new.
    public func assign(_ deliveries: [NewDelivery]) async throws -> [Delivery] {
        try await noteRecorded(try await store.recordDeliveries(deliveries))
    }

    /// Applies the scheduler's decisions (the day's assignments and the due index) in one transaction and
    /// returns the deliveries that were new.
    public func commit(_ updates: [ScheduleUpdate]) async throws -> [Delivery] {
        try await noteRecorded(try await store.commitSchedules(updates))
    }

    /// Turns due reminders into deliveries awaiting a push, in one transaction.
    public func fire(
        _ reminders: [Reminder],
        at now: Date,
        reportDays: [TenantID: String] = [:]
    ) async throws -> [Delivery] {
        try await noteRecorded(try await store.fireReminders(reminders, at: now, reportDays: reportDays))
    }

    /// Takes note of deliveries recorded past the ledger (an admin's, written with its audit entry): counted, and
    /// in their users' hot state.
    public func noteAssigned(_ recorded: [Delivery]) async throws {
        _ = try await noteRecorded(recorded)
    }

    private func noteRecorded(_ recorded: [Delivery]) async throws -> [Delivery] {
        metrics.ledgerWrites("assigned", count: recorded.count)
        // One call per shard, not per user: a batch of thousands of users costs a handful of actor hops.
        var byShard: [Int: [UserID: [Delivery]]] = [:]
        for delivery in recorded {
            byShard[shardIndex(delivery.user), default: [:]][delivery.user, default: []].append(delivery)
        }
        for (index, users) in byShard { await shards[index].recorded(users) }
        return recorded
    }

    /// A page of the user's deliveries, newest first, optionally marking the returned ones fetched.
    public func page(
        tenant: TenantID,
        user: UserID,
        after: DeliveryID? = nil,
        before: DeliveryID? = nil,
        limit: Int,
        markFetchedAt: Date? = nil
    ) async throws -> LedgerPage {
        let (items, unread) = try await shard(user).page(
            tenant: tenant,
            user: user,
            after: after,
            before: before,
            limit: limit,
            markFetched: markFetchedAt
        )
        return LedgerPage(items: items, unreadCount: unread)
    }

    /// The user's newest delivery of an impulse, marked fetched (or read) at `now` when `mark` is set.
    public func item(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        mark: DeliveryMark.Kind? = nil,
        at now: Date = Date()
    ) async throws -> DeliveredImpulse? {
        try await shard(user).item(tenant: tenant, user: user, impulse: impulse, mark: mark, at: now)
    }

    /// Records the push gateway's outcomes for a batch (pushed with the apns-id APNs accepted, or settled without
    /// one) in the hot state of users held in memory and queues them for the next group commit. It waits for the
    /// commit only with `durably`, or while the writer is far behind: an outcome lost in a crash means the push
    /// is sent again at the next start, under the same collapse id, so the gateway need not wait for the disk.
    /// `written` are deliveries whose pushed mark `recordAccepted` already queued: only the shards learn of them.
    public func record(
        _ settlements: [PushSettlement],
        at now: Date = Date(),
        durably: Bool = false,
        written: Set<DeliveryID> = []
    ) async throws {
        guard !settlements.isEmpty else { return }
        let marks = settlements.map { $0.mark(at: now) }
        let unwritten = written.isEmpty ? marks : marks.filter { !written.contains($0.delivery) }
        if durably { try await writer.write(unwritten) } else { await writer.submit(unwritten) }
        var byShard: [Int: [(mark: DeliveryMark, user: UserID)]] = [:]
        for (settlement, mark) in zip(settlements, marks) {
            byShard[shardIndex(settlement.user), default: []].append((mark, settlement.user))
        }
        for (index, group) in byShard { await shards[index].applied(group) }
    }

    /// Queues a pushed mark the moment APNs accepted the push (from its answer's event loop, without waiting), so
    /// that a crash before the rest of its batch is answered does not send it again; `record` then passes the
    /// delivery in `written`.
    public func recordAccepted(_ settlement: PushSettlement, at now: Date = Date()) {
        guard settlement.apnsID != nil else { return }
        writer.offer(settlement.mark(at: now))
    }

    /// Waits until every outcome recorded so far is written (at shutdown).
    public func flushOutcomes() async {
        await writer.drain()
    }

    public func unreadCount(tenant: TenantID, user: UserID) async throws -> Int {
        try await shard(user).unreadCount(tenant: tenant, user: user)
    }

    public func clear(tenant: TenantID, user: UserID) async throws -> Int {
        let removed = try await store.clearDeliveries(tenant: tenant, user: user)
        await shard(user).invalidate(tenant: tenant, user: user)
        return removed
    }

    /// Applies a change another process made (the store's change feed).
    public func apply(_ change: StoreChange) async {
        switch change.subject {
        case .ledger(let user): await shard(user).invalidate(tenant: change.tenant, user: user)
        case .ledgers(let users):
            for (index, group) in Dictionary(grouping: users, by: shardIndex) {
                await shards[index].invalidate(tenant: change.tenant, users: group)
            }
        case .catalog:
            // The ledger holds no content, so a catalog change is none of its business; a deleted tenant's users
            // are (names and ids may come back with a new tenant of the same name). Run after the catalog forgot it;
            // a store that cannot answer counts as gone (dropping hot state loses nothing).
            guard (try? await catalog.tenant(change.tenant)) == nil else { return }
            for shard in shards { await shard.invalidate(tenant: change.tenant) }
        case .credentials, .profile, .apnsCredentials: break
        }
    }

    /// Users held in memory across all shards (for inspection and tests of the memory bound).
    public func cachedUserCount() async -> Int {
        var total = 0
        for shard in shards { total += await shard.cachedUserCount }
        return total
    }
}
