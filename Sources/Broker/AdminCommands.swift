import ArgumentParser
import Engine
import Foundation
import Gateway
import Logging

/// Opens the store for an admin command and turns Engine errors into a clear message and exit code.
func withStore(_ common: CommonOptions, _ body: (any BrokerStore, BrokerSettings) async throws -> Void) async throws {
    let settings = try BrokerSettings(options: common)
    try await withStore(settings, logger: bootstrapLogging(min(settings.logLevel, .warning)), body)
}

/// The same with settings and logging the command chose (`broker migrate` leaves the schema to itself).
func withStore(
    _ settings: BrokerSettings,
    logger: Logger,
    _ body: (any BrokerStore, BrokerSettings) async throws -> Void
) async throws {
    // The arguments parsed: what fails from here on is the command's work, reported without the usage text.
    do {
        let store = try await settings.openStore(logger: logger)
        do {
            try await body(store, settings)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    } catch let error as EngineError {
        throw CommandFailure(error.message)
    } catch let error as ValidationError {
        throw CommandFailure(error.message)
    }
}

/// Opens the store and the administration the admin API uses too: the same rules, the same audit trail (the
/// command line is an operator named `cli`).
func withAdministration(
    _ common: CommonOptions,
    _ body: (Administration, any BrokerStore, BrokerSettings) async throws -> Void
) async throws {
    try await withStore(common) { store, settings in
        let cost = settings.bcryptCost
        let administration = Administration(
            store: store,
            hashPassword: { password, _ in try await Authenticator.hash(password, cost: cost) }
        )
        try await body(administration, store, settings)
    }
}

/// A command that could not do its work: printed as `Error: <message>` (exit status 1), without the usage text
/// ArgumentParser adds to a `ValidationError`.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ message: String) { description = message }
}

func parseTenant(_ text: String) throws -> TenantID {
    do { return try TenantID(text) } catch { throw ValidationError(error.message) }
}

func parsePushExpiry(_ text: String) throws -> PushExpiry {
    guard let expiry = PushExpiry(rawValue: text) else {
        throw ValidationError("push expiry must be end-of-day or immediate, not '\(text)'")
    }
    return expiry
}

struct TenantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tenant",
        abstract: "Create, change, list and delete tenants.",
        subcommands: [Create.self, Update.self, List.self, Delete.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a tenant.")
        @OptionGroup var common: CommonOptions
        @Argument(help: "Tenant id: 1-63 characters of a-z, 0-9 and '-'.") var id: String
        @Option(help: "Display name.") var name: String?
        @Option(help: "Default language (EN, DE, ...).") var language = "EN"
        @Option(help: "Default IANA time zone.") var timeZone = "Europe/Berlin"
        @Option(help: "Default local delivery time HH:mm.") var deliveryTime = "08:00"
        @Option(help: "Maximum scheduled pushes per user and day.") var maxPerDay = 1
        @Option(help: "APNs topic (the app's bundle id).") var apnsTopic = "com.example.impulse"
        @Option(
            help:
                "How long APNs keeps pushes for offline phones: end-of-day (of the user's delivery day) or immediate (apns-expiration 0)."
        )
        var pushExpiry = PushExpiry.endOfDay.rawValue
        @Option(
            help:
                "When users added through administration start: next-delivery-time (their first delivery time after they were added) or immediate (today's impulse at once when its time has passed)."
        )
        var firstDelivery = FirstDelivery.nextDeliveryTime.rawValue

        func run() async throws {
            try await withAdministration(common) { administration, _, _ in
                let tenant = try await administration.createTenant(
                    try parseTenant(id),
                    TenantSettings(
                        name: name,
                        defaultLanguage: language,
                        defaultTimeZone: timeZone,
                        deliveryTime: deliveryTime,
                        maxPushesPerDay: maxPerDay,
                        apnsTopic: apnsTopic,
                        pushExpiry: pushExpiry,
                        firstDelivery: firstDelivery
                    ),
                    by: .commandLine
                )
                print("created tenant \(tenant.id)")
            }
        }
    }

    struct Update: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a tenant's settings.")
        @OptionGroup var common: CommonOptions
        @Argument var id: String
        @Option(help: "Display name.") var name: String?
        @Option(help: "Default language (EN, DE, ...).") var language: String?
        @Option(help: "Default IANA time zone.") var timeZone: String?
        @Option(help: "Default local delivery time HH:mm.") var deliveryTime: String?
        @Option(help: "Maximum scheduled pushes per user and day.") var maxPerDay: Int?
        @Option(help: "APNs topic (the app's bundle id).") var apnsTopic: String?
        @Option(help: "end-of-day or immediate (see tenant create).") var pushExpiry: String?
        @Option(help: "Default quiet hours HH:mm-HH:mm for users without their own; equal times remove them.")
        var quietHours: String?
        @Option(help: "The programme's days, for example 1,2,3,4,5 (1 = Monday); users choose among them.")
        var weekdays: String?
        @Option(help: "production or sandbox: the environment of tokens registered without one.")
        var apnsEnvironment: String?
        @Flag(help: "Suspend the tenant: no dispatch; its users and admins are refused (403).") var suspend = false
        @Flag(help: "Resume a suspended tenant.") var resume = false
        @Option(help: "next-delivery-time or immediate (see tenant create).") var firstDelivery: String?
        @Option(
            help:
                "on or off: learned delivery times (each user's impulse moves toward when they read, within the window); resume: on again after the safety valve turned them off."
        )
        var learnedTiming: String?
        @Option(help: "Minutes either way a learned time may move from the stated one (30-360; 180 by default).")
        var learnedWindow: Int?
        @Option(help: "Share of users kept on fixed times to measure the effect (0-0.5; 0.1 by default).")
        var learnedHoldout: Double?

        func run() async throws {
            guard !(suspend && resume) else { throw ValidationError("give --suspend or --resume, not both") }
            let learning = try learnedTiming.map { text in
                switch text {
                case "on", "resume": true
                case "off": false
                default: throw ValidationError("--learned-timing is on, off or resume")
                }
            }
            let timing =
                learning == nil && learnedWindow == nil && learnedHoldout == nil
                ? nil
                : LearnedTimingChanges(
                    enabled: learning,
                    windowMinutes: learnedWindow,
                    holdoutShare: learnedHoldout,
                    resume: learnedTiming == "resume" ? true : nil
                )
            let settings = TenantSettings(
                name: name,
                defaultLanguage: language,
                defaultTimeZone: timeZone,
                deliveryTime: deliveryTime,
                maxPushesPerDay: maxPerDay,
                quietHours: try quietHours.map { (text) throws(EngineError) in try QuietHours(parsing: text) },
                weekdays: try weekdays.map(parseWeekdays),
                apnsEnvironment: apnsEnvironment,
                apnsTopic: apnsTopic,
                pushExpiry: pushExpiry,
                suspended: suspend ? true : resume ? false : nil,
                firstDelivery: firstDelivery,
                learnedTiming: timing
            )
            guard settings != TenantSettings() else { throw ValidationError("nothing to change: give an option") }
            try await withAdministration(common) { administration, _, _ in
                let tenant = try await administration.updateTenant(try parseTenant(id), settings, by: .commandLine)
                let learned = tenant.learnedTiming
                print(
                    "tenant \(tenant.id): push expiry \(tenant.pushExpiry.rawValue)\(tenant.suspended ? ", suspended" : "")"
                        + ", learned times \(learned.enabled ? "on" : "off") (window \(learned.windowMinutes) min, "
                        + "holdout \(learned.holdoutShare.formatted(.percent)))"
                        + (learned.fallback.map { "; fallen back to stated times since \($0.since): \($0.reason)" }
                            ?? "")
                )
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tenants.")
        @OptionGroup var common: CommonOptions

        func run() async throws {
            try await withAdministration(common) { administration, _, _ in
                for tenant in try await administration.tenants(by: .commandLine) {
                    print(
                        "\(tenant.id)\t\(tenant.name)\t\(tenant.defaultLanguage)\t\(tenant.defaultTimeZone)\t\(tenant.apnsTopic)\t\(tenant.pushExpiry.rawValue)\(tenant.suspended ? "\tsuspended" : "")"
                    )
                }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Erase a tenant: its users, devices, deliveries, reminders, schedules and catalog (not its audit trail)."
        )
        @OptionGroup var common: CommonOptions
        @Argument var id: String
        @Option(help: "The tenant's id again, to confirm.") var confirm: String?

        func run() async throws {
            try await withAdministration(common) { administration, _, settings in
                let report = try await administration.deleteTenant(
                    try parseTenant(id),
                    confirm: confirm,
                    media: MediaFolder(folder: settings.dataDirectory + "/media"),
                    by: .commandLine
                )
                print(
                    "deleted tenant \(id): \(report.users) users, \(report.devices) devices, \(report.deliveries) deliveries, \(report.reminders) reminders, \(report.impulses) impulses, \(report.mediaFiles) media files"
                )
            }
        }
    }
}

struct CatalogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "catalog",
        abstract: "Manage a tenant's impulse catalog.",
        subcommands: [Import.self]
    )

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import impulses from a JSON file ({\"items\": [...]}, the original format plus lifeArea)."
        )
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument(help: "Path of the catalog file.") var file: String

        func run() async throws {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            try await withAdministration(common) { administration, _, settings in
                let id = try parseTenant(tenant)
                let media = settings.dataDirectory + "/media"
                let (inserted, updated) = try await administration.importCatalog(
                    tenant: id,
                    data,
                    mediaExists: { MediaFiles.serves($0, folder: media) },
                    by: .commandLine
                )
                print("imported \(inserted + updated) impulses into \(id): \(inserted) new, \(updated) updated")
            }
        }
    }
}

struct Deliver: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Assign an impulse to a user now (it appears in the user's CurrentImpulse)."
    )
    @OptionGroup var common: CommonOptions
    @Argument var tenant: String
    @Argument var username: String
    @Argument(help: "The impulse's workingID.") var impulse: String

    func run() async throws {
        try await withAdministration(common) { administration, _, _ in
            let id = try parseTenant(tenant)
            let delivery = try await administration.deliver(
                tenant: id,
                username: username,
                impulse: try ImpulseID(impulse),
                awaitsPush: false,
                by: .commandLine
            )
            print("assigned \(impulse) to \(username) as delivery \(delivery.id.rawValue)")
        }
    }
}

/// `1,2,3,4,5`: ISO weekdays, checked by the engine.
func parseWeekdays(_ text: String) throws -> [Int] {
    try text.split(separator: ",").map {
        guard let day = Int($0.trimmingCharacters(in: .whitespaces)) else {
            throw ValidationError("weekdays must be numbers 1 (Monday) to 7 (Sunday) separated by commas")
        }
        return day
    }
}
