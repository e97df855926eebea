/// How the webhook dispatcher's attempts are shared: at most `concurrency` in flight, `perEndpoint` for one
/// endpoint and `perTenant` for one tenant's endpoints together, so one tenant's slow or dead endpoints never take
/// the slots another tenant's events need. A pure value.
public struct WebhookShares: Sendable, Equatable {
    public let concurrency: Int
    public let perEndpoint: Int
    public let perTenant: Int

    public init(concurrency: Int, perEndpoint: Int, perTenant: Int) {
        self.concurrency = max(1, concurrency)
        self.perEndpoint = max(1, min(perEndpoint, self.concurrency))
        self.perTenant = max(self.perEndpoint, min(perTenant, self.concurrency))
    }

    /// What may be taken from the queue now.
    public struct Room: Sendable, Equatable {
        /// Attempts that may start, in all.
        public var free: Int
        /// Endpoints with `perEndpoint` attempts in flight.
        public var fullEndpoints: Set<String>
        /// Attempts each tenant with some in flight may still start (0: none); other tenants may start
        /// `perTenant`.
        public var tenantRoom: [TenantID: Int]
        public var perTenant: Int

        public init(free: Int, fullEndpoints: Set<String>, tenantRoom: [TenantID: Int], perTenant: Int) {
            self.free = free
            self.fullEndpoints = fullEndpoints
            self.tenantRoom = tenantRoom
            self.perTenant = perTenant
        }

        /// The room of one tenant.
        public func room(for tenant: TenantID) -> Int { tenantRoom[tenant] ?? perTenant }
    }

    public func room(endpoints: [String: Int], tenants: [TenantID: Int]) -> Room {
        Room(
            free: max(0, concurrency - endpoints.values.reduce(0, +)),
            fullEndpoints: Set(endpoints.filter { $0.value >= perEndpoint }.keys),
            tenantRoom: tenants.mapValues { max(0, perTenant - $0) },
            perTenant: perTenant
        )
    }
}
