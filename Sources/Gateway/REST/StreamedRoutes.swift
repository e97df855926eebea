/// The routes that read their request body as it arrives instead of whole: a tenant's user imports and media
/// uploads. Over HTTP/2
/// the engine hands these requests up at their headers (`RESTChannel`); their bodies may be as large as
/// `maxUploadSize`, and the connection is not read while the route lags behind.
enum StreamedRoutes {
    /// `/t/{tenant}/admin/v1/user-imports`, `/t/{tenant}/admin/v1/media/{name}` and the console's upload
    /// `/t/{tenant}/console/media`, with any query.
    @Sendable static func matches(_ path: String) -> Bool {
        let end = path.firstIndex(of: "?") ?? path.endIndex
        let parts = path[..<end].split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 5, parts[0].isEmpty, parts[1] == "t", parts[3] == "console", parts[4] == "media" {
            return true
        }
        guard parts.count >= 6, parts[0].isEmpty, parts[1] == "t", parts[3] == "admin", parts[4] == "v1" else {
            return false
        }
        return (parts.count == 6 && parts[5] == "user-imports") || (parts.count == 7 && parts[5] == "media")
    }
}
