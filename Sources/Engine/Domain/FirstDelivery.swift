import Foundation

/// When a new user's programme starts, chosen per tenant and overridable per request (a user created or
/// imported through the admin API, the console or the CLI).
public enum FirstDelivery: String, Sendable, Equatable, CaseIterable {
    /// At the user's first delivery time after they were created: an import at 15:00 of users who receive at
    /// 08:00 delivers the next morning. The default.
    case nextDeliveryTime = "next-delivery-time"
    /// A welcome impulse: today's, at once when today's delivery time has already passed (within the
    /// scheduler's staleness limit), else at today's delivery time. Quiet hours and the programme's days still win.
    case immediate

    /// The first instant a new user's first day may be planned for, created at `now`: nil for no bound beyond
    /// the staleness limit.
    public func startsAt(createdAt now: Date) -> Date? {
        self == .immediate ? nil : now
    }

    /// Parses the API's and the CLI's spelling, refusing anything else with the accepted values.
    public init(parsing text: String) throws(EngineError) {
        guard let value = FirstDelivery(rawValue: text) else {
            throw EngineError(.invalidInput, "firstDelivery must be next-delivery-time or immediate")
        }
        self = value
    }
}
