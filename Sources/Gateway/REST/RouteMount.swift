import Hummingbird

/// Routes another part of the application adds to the REST server's router (the admin API, the console), mounted
/// by the application: the REST plumbing (deadlines, admission, problems, route records) serves them without
/// naming them.
protocol RouteMount: Sendable {
    /// The largest request body one of its routes reads in memory (a console form), 0 for none beyond the API's.
    var maxBodySize: Int { get }
    func addRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String)
}
