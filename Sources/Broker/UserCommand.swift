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
            value = password ?? ProcessInfo.processInfo.environment["BROKER_PASSWORD"]
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
        subcommands: [Add.self, List.self, Disable.self, Enable.self, SetPassword.self]
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
        @Flag(help: "May use the tenant's admin page (/SendPush).") var admin = false

        func run() async throws {
            let password = try secret.resolve()
            try await withStore(common) { store, settings in
                let id = try parseTenant(tenant)
                guard try await store.tenant(id) != nil else { throw ValidationError("unknown tenant \(id)") }
                let scores =
                    try lifeAreas.map { text in
                        try LifeAreaScores(
                            text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) ?? -1 }
                        )
                    } ?? .neutral
                let preferences = DeliveryPreferences(
                    timeZone: try timeZone.map { (zone) throws(EngineError) in try validatedTimeZone(zone) }
                )
                let hash = try await Authenticator.hash(password, cost: settings.bcryptCost)
                guard try await store.user(tenant: id, username: username) == nil else {
                    throw CommandFailure("user '\(username)' already exists in \(id)")
                }
                let user = try await store.createUser(
                    try NewUser(
                        tenant: id,
                        username: username,
                        passwordHash: hash,
                        language: language,
                        lifeAreas: scores,
                        preferences: preferences,
                        isAdmin: admin
                    )
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
            try await withStore(common) { store, settings in
                let hash = try await Authenticator.hash(password, cost: settings.bcryptCost)
                guard
                    try await store.setPassword(tenant: try parseTenant(tenant), username: username, passwordHash: hash)
                else {
                    throw ValidationError("unknown user")
                }
                print("password of \(username) changed")
            }
        }
    }
}

private func setEnabled(_ common: CommonOptions, _ tenant: String, _ username: String, _ enabled: Bool) async throws {
    try await withStore(common) { store, _ in
        guard try await store.setEnabled(tenant: try parseTenant(tenant), username: username, enabled: enabled) else {
            throw ValidationError("unknown user")
        }
        print("\(username) \(enabled ? "enabled" : "disabled")")
    }
}
