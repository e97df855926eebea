import Foundation

/// The durable state of the broker: the composition of one port per feature, each beside the actor that owns it
/// (``LedgerStore``, ``ScheduleStore``, ``DeviceStore``, ...). Actors depend on the ports they use; the CLI, the REST
/// API and the application wiring see the whole. Implemented by ``SQLiteStore`` and, for scale-out, a PostgreSQL
/// adapter.
///
/// Every method that reads or writes tenant data takes the tenant, and implementations must scope every
/// statement by it: nothing of one tenant is visible to, or changeable by, another.
/// Multi-row writes are atomic: a method either applies completely or throws and changes nothing.
public protocol BrokerStore: ChangeFeedStore, TenantStore, UserStore, CatalogStore, DeviceStore, LedgerStore,
    ScheduleStore, PushTargetStore, ReminderStore, AdministrationStore, IdempotencyStore, APNsCredentialStore,
    EngagementStore, WebhookStore, ConsoleSessionStore, ProviderTokenStore, SchemaStore, TimingStore, TimingGuardStore
{
    /// Closes connections the store holds (PostgreSQL's pool); the store is unusable afterwards. Called once,
    /// after everything that writes has stopped.
    func close() async
}

extension BrokerStore {
    public func close() async {}
}
