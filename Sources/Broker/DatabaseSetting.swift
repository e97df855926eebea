import Engine
import Foundation

/// Where the broker keeps its state: a SQLite file (the embedded default) or a PostgreSQL database several nodes
/// share (`database` set to a `postgres://` URL).
enum DatabaseSetting: Equatable {
    case sqlite(path: String)
    case postgres(PostgresStoreConfiguration)

    /// `text` is a file path or a `postgres://` URL; `password`, when given, is used for a URL that has none.
    init(_ text: String, password: String?) throws(EngineError) {
        guard PostgresStoreConfiguration.isURL(text) else {
            self = .sqlite(path: text)
            return
        }
        var configuration = try PostgresStoreConfiguration(url: text)
        if configuration.password == nil { configuration.password = password }
        self = .postgres(configuration)
    }
}

extension BrokerSettings {
    /// The database password from `BROKER_DATABASE_PASSWORD`, or from the file `BROKER_DATABASE_PASSWORD_FILE` or
    /// `databasePasswordFile` names (its first line): never from a flag, which any user could read in the process
    /// list.
    static func databasePassword(environment: [String: String], file: ConfigFile) throws(EngineError) -> String? {
        try secret(
            "BROKER_DATABASE_PASSWORD",
            environment: environment,
            file: file.databasePasswordFile,
            what: "database password"
        )
    }

    /// A secret from the variable `name`, or from the first line of the file `<name>_FILE` (or `file`, the
    /// configuration's setting) names.
    static func secret(
        _ name: String,
        environment: [String: String],
        file: String?,
        what: String
    ) throws(EngineError) -> String? {
        if let value = environment[name], !value.isEmpty { return value }
        let path = environment[name + "_FILE"].flatMap { $0.isEmpty ? nil : $0 } ?? file
        guard let path else { return nil }
        guard let data = FileManager.default.contents(atPath: path),
            let value = String(data: data, encoding: .utf8)?.split(whereSeparator: \.isNewline).first
        else {
            throw EngineError(.invalidInput, "cannot read the \(what) file \(path)")
        }
        return String(value)
    }
}
