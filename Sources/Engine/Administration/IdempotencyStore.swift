import Foundation

/// What a creating request answered, kept for its `Idempotency-Key`: a retry gets the same answer and writes
/// nothing again.
public struct IdempotentResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String?
    public var location: String?
    public var body: [UInt8]

    public init(status: Int, contentType: String?, location: String?, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.location = location
        self.body = body
    }
}

/// The state of an idempotency key when a request presents it.
public enum IdempotencyClaim: Sendable, Equatable {
    /// New: the request runs, and its answer is kept (``IdempotencyStore/completeIdempotencyKey``).
    case claimed
    /// A request with the key is still running (or its process died within the last minute).
    case inProgress(requestHash: String)
    /// A request with the key was answered: `response`, for a request whose hash was `requestHash`.
    case answered(requestHash: String, response: IdempotentResponse)
}

/// Idempotency keys per caller (`scope`), kept for a day.
public protocol IdempotencyStore: Sendable {
    /// Claims `key` for a request of `requestHash`, or says what became of an earlier claim. A key answered more
    /// than a day ago, or claimed more than a minute ago and never answered, is claimed anew.
    func claimIdempotencyKey(
        scope: String,
        key: String,
        requestHash: String,
        at now: Date
    ) async throws
        -> IdempotencyClaim
    /// Keeps the answer of a claimed key.
    func completeIdempotencyKey(scope: String, key: String, response: IdempotentResponse) async throws
    /// Gives a claimed key up (the request failed: a retry runs it again).
    func releaseIdempotencyKey(scope: String, key: String) async throws
}

/// How long keys live: answered ones a day, unanswered claims (a process that died mid-request) a minute.
public enum IdempotencyWindow {
    public static let answered: TimeInterval = 86_400
    public static let unanswered: TimeInterval = 60
}
