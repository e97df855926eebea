import Foundation
import Logging

/// The device token registry: one owner per token within a tenant and topic.
///
/// Registration is atomic in the store (the token moves from its previous owner in the same transaction),
/// so the invariant holds across processes and nodes; the actor orders this process's changes and logs them.
public actor TokenRegistry {
    private let store: any DeviceStore
    private let logger: Logger
    private let metrics: BrokerMetrics

    public init(store: any DeviceStore, logger: Logger, metrics: BrokerMetrics = .disabled) {
        self.store = store
        self.logger = logger
        self.metrics = metrics
    }

    /// Makes `user` the one owner of `token` and refreshes its registration time.
    @discardableResult
    public func register(
        tenant: Tenant,
        user: UserID,
        token: DeviceToken,
        name: String,
        environment: APNsEnvironment,
        channel: PushChannel = .apns,
        at now: Date = Date()
    ) async throws -> DeviceRegistration {
        // An Android device is kept under the tenant's app identity too (its topic): one owner per token either way.
        let device = try Device(
            tenant: tenant.id,
            topic: tenant.apnsTopic,
            token: token,
            owner: user,
            name: name,
            environment: environment,
            registeredAt: now,
            channel: channel
        )
        let outcome = try await store.registerDevice(device)
        var metadata: Logger.Metadata = ["tenant.id": "\(tenant.id)", "user.id": "\(user)", "device.token": "\(token)"]
        switch outcome {
        case .created:
            metrics.token("registered", tenant: tenant.id)
            logger.info("device registered", metadata: metadata)
        case .refreshed:
            logger.debug("device registration refreshed", metadata: metadata)
        case .moved(let previous):
            metadata["device.previous_owner"] = "\(previous)"
            metrics.token("moved", tenant: tenant.id)
            logger.info("device moved to a new owner", metadata: metadata)
        }
        return outcome
    }

    /// Removes the token if `user` owns it; answers whether anything was removed.
    @discardableResult
    public func unregister(tenant: Tenant, user: UserID, token: DeviceToken) async throws -> Bool {
        let removed = try await store.unregisterDevice(
            tenant: tenant.id,
            topic: tenant.apnsTopic,
            token: token,
            owner: user
        )
        if removed {
            metrics.token("unregistered", tenant: tenant.id)
            logger.info(
                "device unregistered",
                metadata: ["tenant.id": "\(tenant.id)", "user.id": "\(user)", "device.token": "\(token)"]
            )
        }
        return removed
    }

    public func devices(tenant: Tenant, user: UserID) async throws -> [Device] {
        try await store.devices(tenant: tenant.id, owner: user)
    }

    // MARK: Outcomes reported by the push gateway

    /// APNs' verdicts on one tenant's tokens (quarantine a malformed or wrong-environment token; remove one that
    /// belongs to another app, or one APNs says is gone if it was registered before that), in one transaction.
    /// Returns whether each changed a device.
    public func apply(tenant: Tenant, _ verdicts: [TokenVerdict]) async throws -> [Bool] {
        let changed = try await store.applyTokenVerdicts(tenant: tenant.id, topic: tenant.apnsTopic, verdicts)
        var quarantined = 0
        var removed = 0
        for (verdict, changed) in zip(verdicts, changed) {
            // Built only when the line is logged (the metadata's closure is not run below the log level).
            func metadata() -> Logger.Metadata { ["tenant.id": "\(tenant.id)", "device.token": "\(verdict.token)"] }
            switch (verdict.kind, changed) {
            case (.quarantine, true):
                quarantined += 1
                logger.notice("device token quarantined", metadata: metadata())
            case (.remove, true):
                removed += 1
                logger.notice("device token removed", metadata: metadata())
            case (.remove(let before), false) where before != .distantFuture:
                logger.notice(
                    "device token kept: registered after APNs' verdict, or already gone",
                    metadata: metadata()
                )
            case (.quarantine, false), (.remove, false):
                break
            }
        }
        metrics.token("quarantined", tenant: tenant.id, count: quarantined)
        metrics.token("removed", tenant: tenant.id, count: removed)
        return changed
    }
}
