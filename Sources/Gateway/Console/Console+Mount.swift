import Hummingbird

/// The console is mounted by the application on the REST server's router, its forms read up to `maxFormSize`.
extension Console: RouteMount {
    var maxBodySize: Int { maxFormSize }

    func addRoutes(_ router: Router<BrokerRequestContext>, api: RESTAPI, scheme: String) {
        addRoutes(router, scheme: scheme)
    }
}
