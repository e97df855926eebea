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
        if let password = environment["BROKER_DATABASE_PASSWORD"], !password.isEmpty { return password }
        let path =
            environment["BROKER_DATABASE_PASSWORD_FILE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? file.databasePasswordFile
        guard let path else { return nil }
        guard let data = FileManager.default.contents(atPath: path),
            let password = String(data: data, encoding: .utf8)?.split(whereSeparator: \.isNewline).first
        else {
            throw EngineError(.invalidInput, "cannot read the database password file \(path)")
        }
        return String(password)
    }
}
