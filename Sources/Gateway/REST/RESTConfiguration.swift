import Engine

/// Configuration of the client REST API.
public struct RESTConfiguration: Sendable {
    /// Prefix of absolute URLs in responses (`https://impulses.example.com`); when nil, derived from each request.
    public var publicBaseURL: String?
    /// Largest request body accepted; larger bodies get 413.
    public var maxBodySize: Int
    /// The largest body of a route that reads it as it arrives (user imports: `StreamedRoutes`).
    public var maxUploadSize: Int
    /// The longest such a request may take (a user import hashes every password it is given).
    public var uploadDeadline: Duration
    /// How long verified credentials are reused before bcrypt runs again.
    public var credentialCacheTTL: Duration
    /// Default and largest page size of impulse lists.
    public var defaultPageSize: Int
    public var maxPageSize: Int
    /// APNs environment recorded for tokens registered through the original `POST /RegisterToken`.
    public var originalTokenEnvironment: APNsEnvironment
    /// Folder served publicly under `/media/`; nil serves nothing there. Each tenant's uploads go to the folder
    /// named after it.
    public var mediaDirectory: String?
    /// The most all of one tenant's uploaded media may take.
    public var mediaQuota: Int
    /// Reminders a user may have pending, and how far ahead one may be set.
    public var maximumPendingReminders: Int
    public var reminderHorizon: Duration
    /// The cost of new password hashes; an unknown username is checked against a stand-in hash of this cost, so
    /// it takes as long as a wrong password.
    public var bcryptCost: UInt8
    /// bcrypt checks waiting for a thread at most; more are refused with 503.
    public var verificationQueue: Int
    /// When failed logins slow down and are refused, per username and per client address.
    var loginThrottle = LoginThrottle.Policy()
    /// Proxies (a load balancer, an ingress) whose `X-Forwarded-For` names the client for login throttling.
    public var trustedProxies: [NetworkRange] = []
    /// The HTTPS listener reads a PROXY protocol header (versions 1 and 2) on connections from `trustedProxies`:
    /// an L4 balancer that passes TLS through cannot add `X-Forwarded-For`.
    public var proxyProtocol = false
    /// What time-based limits are measured on (the admission's relief time); a test's clock moves by hand.
    public var clock: any EngineClock = SystemClock()
    /// The channels this broker pushes to: a device of another platform is refused at registration (422), not
    /// kept to be dropped at every push. Set from the push setup.
    public var pushChannels: Set<PushChannel> = [.apns]
    /// Failed logins one client address may make before it is refused (429), and how fast that allowance comes
    /// back: one attempt every `loginAddressLeak`. A user who logged in from the address in the last day is not
    /// refused for other people's failures there.
    public var loginAddressLimit: Int {
        get { Int(loginThrottle.perAddress.limit) }
        set {
            loginThrottle.perAddress.limit = Double(newValue)
            loginThrottle.perAddress.delayFrom = Double(max(1, newValue / 3))
        }
    }
    public var loginAddressLeak: Duration {
        get { loginThrottle.perAddress.leak }
        set { loginThrottle.perAddress.leak = newValue }
    }
    /// The longest an authenticated request's work (login, store reads and writes) may take before it is answered
    /// 503 with `Retry-After`; the work itself goes on and its result is dropped.
    public var requestDeadline: Duration
    /// The longest an HTTP/1.1 request body (of a route that reads it whole) may take to arrive; past it the
    /// request is answered 408 and its connection closed (nginx's `client_body_timeout`, Go's `ReadTimeout`).
    public var bodyDeadline: Duration
    /// Requests in progress on the node and per tenant; beyond them 503 and 429.
    public var admission: AdmissionLimits
    /// The bearer token that makes a request to the admin API an operator's (besides operator accounts).
    public var operatorToken: String?

    public init(
        publicBaseURL: String? = nil,
        maxBodySize: Int = 64 * 1024,
        maxUploadSize: Int = 64 << 20,
        uploadDeadline: Duration = .seconds(900),
        credentialCacheTTL: Duration = .seconds(300),
        defaultPageSize: Int = 10,
        maxPageSize: Int = 100,
        originalTokenEnvironment: APNsEnvironment = .production,
        mediaDirectory: String? = nil,
        mediaQuota: Int = 1 << 30,
        maximumPendingReminders: Int = 20,
        reminderHorizon: Duration = .seconds(30 * 86_400),
        bcryptCost: UInt8 = 12,
        verificationQueue: Int = 64,
        requestDeadline: Duration = .seconds(10),
        bodyDeadline: Duration = .seconds(30),
        admission: AdmissionLimits = AdmissionLimits(),
        operatorToken: String? = nil
    ) {
        self.publicBaseURL = publicBaseURL.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        self.maxBodySize = maxBodySize
        self.maxUploadSize = max(maxBodySize, maxUploadSize)
        self.uploadDeadline = max(.seconds(1), uploadDeadline)
        self.credentialCacheTTL = credentialCacheTTL
        self.defaultPageSize = defaultPageSize
        self.maxPageSize = maxPageSize
        self.originalTokenEnvironment = originalTokenEnvironment
        self.mediaDirectory = mediaDirectory
        self.mediaQuota = max(0, mediaQuota)
        self.maximumPendingReminders = max(1, maximumPendingReminders)
        self.reminderHorizon = reminderHorizon
        self.bcryptCost = min(31, max(4, bcryptCost))
        self.verificationQueue = max(1, verificationQueue)
        self.requestDeadline = max(.milliseconds(100), requestDeadline)
        self.bodyDeadline = max(.milliseconds(100), bodyDeadline)
        self.operatorToken = operatorToken
        self.admission = admission
    }
}
