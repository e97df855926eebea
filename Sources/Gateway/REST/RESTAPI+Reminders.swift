import Engine
import Foundation
import HTTPTypes
import Hummingbird

/// `POST /v1/impulses/{id}`: remind me of this impulse later, at an instant or at the next local time of day.
struct ReminderRequest: Decodable {
    /// An RFC 3339 instant, `2026-11-22T18:30:00Z` or with an offset.
    var remindAt: String?
    /// A local time of day, `HH:mm`: its next occurrence in the user's time zone.
    var time: String?
}

struct ReminderView: Encodable {
    var id: Int64
    var workingID: String
    var remindAt: String

    init(_ reminder: Reminder) {
        id = reminder.id
        workingID = reminder.impulse.rawValue
        remindAt = ISO8601DateFormatter().string(from: reminder.fireAt)
    }
}

struct ReminderList: Encodable {
    var reminders: [ReminderView]
}

extension RESTAPI {
    func remind(_ request: Request, _ context: BrokerRequestContext, _ caller: Caller) async throws -> Response {
        let id: ImpulseID
        do { id = try ImpulseID(context.parameters.get("impulse") ?? "") } catch { throw Problem.notFound() }
        let body = try await decode(ReminderRequest.self, from: request)
        let now = Date()
        let fireAt = try reminderInstant(body, caller: caller, now: now)
        guard fireAt > now.addingTimeInterval(-60),
            fireAt <= now.addingTimeInterval(Double(configuration.reminderHorizon.components.seconds))
        else {
            let days = configuration.reminderHorizon.components.seconds / 86_400
            throw Problem(.unprocessableContent, "invalid-input", "a reminder must be in the next \(days) days")
        }
        guard try await ledger.item(tenant: caller.tenant.id, user: caller.user.id, impulse: id) != nil else {
            throw Problem(.notFound, "not-found", "no impulse '\(id)' was delivered to you")
        }
        let reminder = try await store.createReminder(
            tenant: caller.tenant.id,
            user: caller.user.id,
            impulse: id,
            at: max(fireAt, now),
            maximumPending: configuration.maximumPendingReminders
        )
        var response = try Representation.response(ReminderView(reminder), for: request, status: .created)
        response.headers[.location] = "\(caller.prefix)/v1/reminders/\(reminder.id)"
        return response
    }

    func listReminders(_ request: Request, _ context: BrokerRequestContext, _ caller: Caller) async throws -> Response {
        let reminders = try await store.reminders(tenant: caller.tenant.id, user: caller.user.id)
        return try Representation.response(ReminderList(reminders: reminders.map(ReminderView.init)), for: request)
    }

    /// One pending reminder of mine (the `Location` of a new one); 404 once it fired or was cancelled.
    func getReminder(_ request: Request, _ context: BrokerRequestContext, _ caller: Caller) async throws -> Response {
        guard let id = context.parameters.get("reminder").flatMap(Int64.init),
            let reminder = try await store.reminders(tenant: caller.tenant.id, user: caller.user.id)
                .first(where: { $0.id == id })
        else { throw Problem(.notFound, "not-found", "no such pending reminder") }
        return try Representation.response(ReminderView(reminder), for: request)
    }

    func deleteReminder(_ request: Request, _ context: BrokerRequestContext, _ caller: Caller) async throws -> Response
    {
        guard let id = context.parameters.get("reminder").flatMap(Int64.init),
            try await store.deleteReminder(tenant: caller.tenant.id, user: caller.user.id, id: id)
        else { throw Problem(.notFound, "not-found", "no such reminder") }
        return Response(status: .noContent)
    }

    private func reminderInstant(_ body: ReminderRequest, caller: Caller, now: Date) throws -> Date {
        switch (body.remindAt, body.time) {
        case (let text?, nil):
            let parser = ISO8601DateFormatter()
            parser.formatOptions = [.withInternetDateTime]
            let fractional = ISO8601DateFormatter()
            fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            guard let date = parser.date(from: text) ?? fractional.date(from: text) else {
                throw Problem(.unprocessableContent, "invalid-input", "remindAt must be an RFC 3339 date-time")
            }
            return date
        case (nil, let text?):
            let time = try Problem.validating { () throws(EngineError) in try LocalTime(parsing: text) }
            let schedule = DailySchedule(
                timeZone: caller.user.preferences.timeZone.flatMap(TimeZone.init(identifier:))
                    ?? TimeZone(identifier: caller.tenant.defaultTimeZone) ?? .gmt,
                deliveryTime: time
            )
            guard let next = schedule.next(after: nil, notBefore: now) else {
                throw Problem(.unprocessableContent, "invalid-input", "that time does not occur soon")
            }
            return next.fireAt
        default:
            throw Problem(.unprocessableContent, "invalid-input", "send exactly one of remindAt or time")
        }
    }
}
