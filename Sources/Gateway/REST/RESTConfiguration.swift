import Engine

/// Configuration of the client REST API.
public struct RESTConfiguration: Sendable {
    /// Prefix of absolute URLs in responses (`https://impulses.example.com`); when nil, derived from each request.
    public var publicBaseURL: String?
    /// Largest request body accepted; larger bodies get 413.
    public var maxBodySize: Int
    /// How long verified credentials are reused before bcrypt runs again.
    public var credentialCacheTTL: Duration
    /// Default and largest page size of impulse lists.
    public var defaultPageSize: Int
    public var maxPageSize: Int
    /// APNs environment recorded for tokens registered through the original `POST /RegisterToken`.
    public var originalTokenEnvironment: APNsEnvironment
    /// Folder served publicly under `/media/`; nil serves nothing there.
    public var mediaDirectory: String?
    /// Reminders a user may have pending, and how far ahead one may be set.
    public var maximumPendingReminders: Int
    public var reminderHorizon: Duration

    public init(
        publicBaseURL: String? = nil,
        maxBodySize: Int = 64 * 1024,
        credentialCacheTTL: Duration = .seconds(300),
        defaultPageSize: Int = 10,
        maxPageSize: Int = 100,
        originalTokenEnvironment: APNsEnvironment = .production,
        mediaDirectory: String? = nil,
        maximumPendingReminders: Int = 20,
        reminderHorizon: Duration = .seconds(30 * 86_400)
    ) {
        self.publicBaseURL = publicBaseURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.maxBodySize = maxBodySize
        self.credentialCacheTTL = credentialCacheTTL
        self.defaultPageSize = defaultPageSize
        self.maxPageSize = maxPageSize
        self.originalTokenEnvironment = originalTokenEnvironment
        self.mediaDirectory = mediaDirectory
        self.maximumPendingReminders = max(1, maximumPendingReminders)
        self.reminderHorizon = reminderHorizon
    }
}
