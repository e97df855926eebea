import ArgumentParser
import Engine
import Foundation
import Gateway

/// Where a password comes from: never a log line, preferably not the command line.
struct PasswordOptions: ParsableArguments {
    @Flag(help: "Read the password from the first line of standard input.")
    var passwordStdin = false

    @Option(
        help:
            "The password (visible to other local users in the process list; prefer --password-stdin or BROKER_PASSWORD)."
    )
    var password: String?

    func resolve() throws -> String {
        let value: String?
        if passwordStdin {
            value = readLine(strippingNewline: true)
        } else {
            if let password {
                value = password
            } else {
                do throws(EngineError) {
                    value = try BrokerSettings.secret(
                        "BROKER_PASSWORD",
                        environment: ProcessInfo.processInfo.environment,
                        file: nil,
                        what: "password"
                    )
                } catch { throw ValidationError(error.message) }
            }
        }
        guard let value, !value.isEmpty, value.utf8.count <= 72 else {
            throw ValidationError("give a password of 1-72 bytes with --password-stdin, BROKER_PASSWORD or --password")
        }
        return value
    }
}

struct UserCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage a tenant's users.",
        subcommands: [
            Add.self, List.self, Disable.self, Enable.self, SetPassword.self, Delete.self, Export.self,
            LearnedTime.self,
        ]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a user.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var secret: PasswordOptions
        @Argument var tenant: String
        @Argument var username: String
        @Option(help: "Language (EN, DE, ...); the tenant's default when unset.") var language: String?
        @Option(help: "IANA time zone; the tenant's default when unset.") var timeZone: String?
        @Option(help: "Twelve comma-separated life area scores 0-100, in the README's order.") var lifeAreas: String?
        @Flag(help: "May use the tenant's admin API and admin page (/SendPush).") var admin = false
        @Option(help: "next-delivery-time or immediate (a welcome impulse); the tenant's setting when unset.")
        var firstDelivery: String?

        func run() async throws {
            let password = try secret.resolve()
            try await withAdministration(common) { administration, _, _ in
                let id = try parseTenant(tenant)
                var scores: [String: Int]?
                if let lifeAreas {
                    let values = lifeAreas.split(separator: ",").map {
                        Int($0.trimmingCharacters(in: .whitespaces)) ?? -1
                    }
                    let checked = try LifeAreaScores(values)
                    scores = Dictionary(uniqueKeysWithValues: LifeArea.allCases.map { ($0.rawValue, checked[$0]) })
                }
                let user = try await administration.createUser(
                    tenant: id,
                    UserDraft(
                        username: username,
                        password: password,
                        settings: UserChanges(language: language, timeZone: timeZone, lifeAreas: scores, admin: admin),
                        firstDelivery: firstDelivery
                    ),
                    by: .commandLine
                )
                print("added \(user.isAdmin ? "admin" : "user") \(user.username) to \(id) (id \(user.id))")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List a tenant's users.")
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String

        func run() async throws {
            try await withStore(common) { store, _ in
                for user in try await store.users(tenant: try parseTenant(tenant)) {
                    let state = user.enabled ? "enabled" : "disabled"
                    print(
                        "\(user.id)\t\(user.username)\t\(state)\t\(user.language ?? "-")\t\(user.preferences.timeZone ?? "-")"
                    )
                }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a user: requests answer 403 from now on.")
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument var username: String

        func run() async throws { try await setEnabled(common, tenant, username, false) }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a disabled user.")
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument var username: String

        func run() async throws { try await setEnabled(common, tenant, username, true) }
    }

    struct SetPassword: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Replace a user's password.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var secret: PasswordOptions
        @Argument var tenant: String
        @Argument var username: String

        func run() async throws {
            let password = try secret.resolve()
            try await withAdministration(common) { administration, _, _ in
                try await administration.resetPassword(
                    tenant: try parseTenant(tenant),
                    username: username,
                    password: password,
                    by: .commandLine
                )
                print("password of \(username) changed")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Erase a user with their devices, deliveries, reminders and schedule (the right to erasure)."
        )
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument var username: String

        func run() async throws {
            try await withAdministration(common) { administration, _, _ in
                let report = try await administration.deleteUser(
                    tenant: try parseTenant(tenant),
                    username: username,
                    by: .commandLine
                )
                print(
                    "deleted \(username): \(report.devices) devices, \(report.deliveries) deliveries, \(report.reminders) reminders"
                )
            }
        }
    }

    struct LearnedTime: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "learned-time",
            abstract:
                "Show a user's learned delivery time and why; --opt-in or --opt-out sets whether a time they set themselves may be learned."
        )
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument var username: String
        @Flag(help: "Let a delivery time the user set themselves be learned.") var optIn = false
        @Flag(help: "Keep a delivery time the user set themselves.") var optOut = false

        func run() async throws {
            guard !(optIn && optOut) else { throw ValidationError("give --opt-in or --opt-out, not both") }
            try await withAdministration(common) { administration, _, _ in
                let tenant = try parseTenant(tenant)
                let view =
                    optIn || optOut
                    ? try await administration.setLearnedTimeOptIn(
                        tenant: tenant,
                        username: username,
                        optedIn: optIn,
                        by: .commandLine
                    )
                    : try await administration.learnedTime(tenant: tenant, username: username, by: .commandLine)
                print("\(username): \(view.summary)\(view.optedIn ? " (opted in)" : "")")
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print everything held of a user as one JSON document (the right of access)."
        )
        @OptionGroup var common: CommonOptions
        @Argument var tenant: String
        @Argument var username: String

        func run() async throws {
            try await withAdministration(common) { administration, _, _ in
                let export = try await administration.exportUser(
                    tenant: try parseTenant(tenant),
                    username: username,
                    by: .commandLine
                )
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                print(String(decoding: try encoder.encode(export), as: UTF8.self))
            }
        }
    }
}

private func setEnabled(_ common: CommonOptions, _ tenant: String, _ username: String, _ enabled: Bool) async throws {
    try await withAdministration(common) { administration, _, _ in
        _ = try await administration.updateUser(
            tenant: try parseTenant(tenant),
            username: username,
            UserChanges(enabled: enabled),
            by: .commandLine
        )
        print("\(username) \(enabled ? "enabled" : "disabled")")
    }
}

struct OperatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operator",
        abstract: "Manage operator accounts: node-wide administration over the admin API.",
        subcommands: [Add.self, List.self]
    )

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add an operator account.")
        @OptionGroup var common: CommonOptions
        @OptionGroup var secret: PasswordOptions
        @Argument(help: "1-64 characters of a-z, 0-9, '.', '_' and '-'.") var name: String

        func run() async throws {
            let password = try secret.resolve()
            try await withAdministration(common) { administration, _, _ in
                try await administration.addOperator(name: name, password: password, by: .commandLine)
                print("added operator \(name)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List operator accounts.")
        @OptionGroup var common: CommonOptions

        func run() async throws {
            try await withAdministration(common) { administration, _, _ in
                for account in try await administration.operators(by: .commandLine) { print(account.name) }
            }
        }
    }
}

struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the audit trail of admin writes, newest first (time, actor, role, tenant, action, target)."
    )
    @OptionGroup var common: CommonOptions
    @Option(help: "Only this tenant's entries.") var tenant: String?
    @Option(help: "How many entries (1-500).") var limit = 50

    func run() async throws {
        try await withAdministration(common) { administration, _, _ in
            let entries = try await administration.auditTrail(
                tenant: try tenant.map(parseTenant),
                before: nil,
                limit: limit,
                by: .commandLine
            )
            for entry in entries {
                let time = entry.at.formatted(.iso8601)
                print(
                    "\(time)\t\(entry.actor)\t\(entry.role.rawValue)\t\(entry.tenant?.rawValue ?? "-")\t\(entry.action)\t\(entry.target)"
                )
            }
        }
    }
}
