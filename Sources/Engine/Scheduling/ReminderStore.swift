import Foundation

/// Reminders users asked for.
public protocol ReminderStore: Sendable {
    /// Adds a reminder; throws `.conflict` when the user already has `maximumPending`.
    func createReminder(
        tenant: TenantID,
        user: UserID,
        impulse: ImpulseID,
        at fireAt: Date,
        maximumPending: Int
    ) async throws -> Reminder
    func reminders(tenant: TenantID, user: UserID) async throws -> [Reminder]
    func deleteReminder(tenant: TenantID, user: UserID, id: Int64) async throws -> Bool
    func dueReminders(notAfter now: Date, limit: Int) async throws -> [Reminder]
    /// Turns reminders into deliveries awaiting a push and removes them, in one transaction; a reminder that is
    /// already gone is skipped.
    /// `reportDays` holds each tenant's date at `now`: the report day of its reminders' deliveries.
    func fireReminders(_ reminders: [Reminder], at now: Date, reportDays: [TenantID: String]) async throws -> [Delivery]
}
