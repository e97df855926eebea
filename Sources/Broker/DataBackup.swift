import Crypto
import Engine
import Foundation

/// A whole embedded deployment in one folder, `impulse-broker-<UTC yyyyMMddTHHmmssZ>`: what a restore on a new
/// machine needs beside the SQLite file. Uploaded media (the catalog's images and sounds), the REST listener's TLS
/// pair, and the credential key that seals uploaded APNs and FCM credentials (only when asked for: it is a secret
/// that may belong in another store than the backups; the manifest always records its fingerprint, so that a
/// restore can tell whether the key it is given opens the backup's credentials).
///
/// A backup is written as `.<name>.partial` and renamed when whole, so a folder under its name is complete. Older
/// backups beyond the newest `keep` are removed. The time of the last good backup is recorded in the data
/// directory (`backup-status.json`), where the running broker reads it for `broker_backup_last_success_timestamp_seconds`.
struct DataBackup {
    /// What a backup holds, written as `manifest.json`.
    struct Manifest: Codable, Equatable {
        var format = 1
        var createdAt: Date
        var schema: String
        var tenants: Int
        var users: Int
        var deliveries: Int
        var databaseBytes: Int
        var mediaFiles: Int
        var mediaBytes: Int
        /// Whether `tls/tls.crt` and `tls/tls.key` hold the pair in use when the backup was taken.
        var tls: Bool
        /// SHA-256 of the credential key (hex), nil when none was configured.
        var credentialKeySHA256: String?
        /// Whether `credential.key` holds the key itself.
        var credentialKeyIncluded: Bool
    }

    static let prefix = "impulse-broker-"
    static let statusFile = "backup-status.json"

    let settings: BrokerSettings

    /// The SQLite file backed up or restored; PostgreSQL deployments back up with PostgreSQL's tools.
    var databasePath: String {
        get throws {
            guard case .sqlite(let path) = settings.database else {
                throw CommandFailure(
                    "this deployment's store is PostgreSQL: back it up with pg_basebackup and WAL archiving or pg_dump "
                        + "(README, \"Backups\"); media and the TLS pair are files to copy alongside"
                )
            }
            return path
        }
    }

    /// The TLS pair in use: the configured files, else the self-signed pair in the data directory.
    var tlsPair: (certificate: String, key: String, configured: Bool) {
        if let certificate = settings.tlsCertificate, let key = settings.tlsPrivateKey {
            return (certificate, key, true)
        }
        let folder = settings.dataDirectory + "/tls"
        return (folder + "/self-signed.crt", folder + "/self-signed.key", false)
    }

    static func fingerprint(_ key: [UInt8]) -> String {
        SHA256.hash(data: key).map { String(format: "%02x", $0) }.joined()
    }

    static func name(at date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .gmt
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return prefix
            + String(
                format: "%04d%02d%02dT%02d%02d%02dZ",
                c.year ?? 0,
                c.month ?? 0,
                c.day ?? 0,
                c.hour ?? 0,
                c.minute ?? 0,
                c.second ?? 0
            )
    }

    // MARK: Backup

    /// Writes a backup folder into `directory`; returns its path and manifest.
    func take(into directory: String, keep: Int, withCredentialKey: Bool) throws -> (path: String, manifest: Manifest) {
        let database = try databasePath
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let now = Date()
        let name = Self.name(at: now)
        let final = directory + "/" + name
        guard !manager.fileExists(atPath: final) else {
            throw CommandFailure("\(final) exists; a backup never overwrites one (one backup a second at most)")
        }
        let partial = directory + "/." + name + ".partial"
        try? manager.removeItem(atPath: partial)
        try manager.createDirectory(
            atPath: partial,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o750]
        )
        do {
            let report = try SQLiteBackup.backup(from: database, to: partial + "/broker.sqlite")
            let media = try Self.copyTree(settings.dataDirectory + "/media", to: partial + "/media")
            let pair = tlsPair
            var tls = false
            if manager.fileExists(atPath: pair.certificate), manager.fileExists(atPath: pair.key) {
                try manager.createDirectory(atPath: partial + "/tls", withIntermediateDirectories: false)
                try Self.copyFile(pair.certificate, to: partial + "/tls/tls.crt", mode: 0o644)
                try Self.copyFile(pair.key, to: partial + "/tls/tls.key", mode: 0o600)
                tls = true
            }
            if withCredentialKey {
                guard let key = settings.credentialKey else {
                    throw CommandFailure("--with-credential-key: no credential key is configured")
                }
                try Self.write(
                    Data((Data(key).base64EncodedString() + "\n").utf8),
                    to: partial + "/credential.key",
                    mode: 0o600
                )
            }
            let manifest = Manifest(
                createdAt: now,
                schema: report.schema,
                tenants: report.tenants,
                users: report.users,
                deliveries: report.deliveries,
                databaseBytes: report.bytes,
                mediaFiles: media.files,
                mediaBytes: media.bytes,
                tls: tls,
                credentialKeySHA256: settings.credentialKey.map(Self.fingerprint),
                credentialKeyIncluded: withCredentialKey
            )
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.dateEncodingStrategy = .iso8601
            try Self.write(try encoder.encode(manifest), to: partial + "/manifest.json", mode: 0o640)
            try manager.moveItem(atPath: partial, toPath: final)
            try prune(directory, keep: keep)
            try recordSuccess(at: now, backup: final)
            return (final, manifest)
        } catch {
            try? manager.removeItem(atPath: partial)
            throw error
        }
    }

    /// Removes backup folders beyond the newest `keep` (by name: their time).
    private func prune(_ directory: String, keep: Int) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix(Self.prefix) }
            .sorted()
        for name in names.dropLast(keep) { try FileManager.default.removeItem(atPath: directory + "/" + name) }
    }

    /// The last good backup's time, for the running broker's metric.
    private func recordSuccess(at date: Date, backup: String) throws {
        let status: [String: Any] = ["lastSuccess": date.timeIntervalSince1970, "backup": backup]
        let data = try JSONSerialization.data(withJSONObject: status, options: [.sortedKeys])
        let path = settings.dataDirectory + "/" + Self.statusFile
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    // MARK: Restore

    /// Puts a backup folder in place for this deployment (its broker stopped): the SQLite file, the media folder,
    /// the self-signed TLS pair (or a configured pair that is missing), after checking that the credential key this
    /// deployment has opens the backup's credentials. What is replaced is kept beside it (`.before-restore-<time>`).
    /// Returns what it did, a line each.
    func restore(from folder: String, acceptOtherKey: Bool) throws -> [String] {
        let database = try databasePath
        let manager = FileManager.default
        let manifest: Manifest
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            manifest = try decoder.decode(
                Manifest.self,
                from: Data(contentsOf: URL(fileURLWithPath: folder + "/manifest.json"))
            )
        } catch {
            throw CommandFailure(
                "\(folder) is not a backup folder (no readable manifest.json): \(error.localizedDescription)"
            )
        }
        guard manifest.format == 1 else {
            throw CommandFailure("\(folder): backup format \(manifest.format) is unknown here")
        }
        var lines: [String] = []
        // The key first: a restore whose credentials this deployment cannot open is refused before anything moves.
        if let expected = manifest.credentialKeySHA256 {
            if let key = settings.credentialKey {
                if Self.fingerprint(key) != expected && !acceptOtherKey {
                    throw CommandFailure(
                        "the configured credential key is not the one the backup's credentials are sealed with "
                            + "(SHA-256 \(expected.prefix(12))…): configure that key"
                            + (manifest.credentialKeyIncluded ? " (the backup holds it: credential.key)" : "")
                            + ", or pass --accept-other-credential-key and upload the credentials again"
                    )
                }
            } else {
                lines.append(
                    "no credential key is configured: the backup's uploaded credentials need the key with SHA-256 "
                        + "\(expected.prefix(12))…"
                        + (manifest.credentialKeyIncluded ? " (in the backup: \(folder)/credential.key)" : "")
                )
            }
        }
        try manager.createDirectory(atPath: settings.dataDirectory, withIntermediateDirectories: true)
        let lock = try StoreFileLock(database: database, exclusive: true)
        defer { withExtendedLifetime(lock) {} }
        let stamp = Int(Date().timeIntervalSince1970)
        let (report, kept) = try SQLiteBackup.restore(from: folder + "/broker.sqlite", to: database, locked: true)
        lines.append(
            "restored the database: schema \(report.schema), \(report.tenants) tenants, \(report.users) users, "
                + "\(report.deliveries) deliveries" + (kept.map { "; the replaced file is kept as \($0)" } ?? "")
        )
        let media = settings.dataDirectory + "/media"
        if manager.fileExists(atPath: folder + "/media") {
            if manager.fileExists(atPath: media) {
                try manager.moveItem(atPath: media, toPath: media + ".before-restore-\(stamp)")
                lines.append("kept the replaced media folder as \(media).before-restore-\(stamp)")
            }
            let copied = try Self.copyTree(folder + "/media", to: media)
            lines.append("restored \(copied.files) media files (\(copied.bytes) bytes)")
        }
        if manifest.tls {
            let pair = tlsPair
            let present = manager.fileExists(atPath: pair.certificate) && manager.fileExists(atPath: pair.key)
            if !pair.configured || !present {
                try manager.createDirectory(
                    atPath: (pair.certificate as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true
                )
                for path in [pair.certificate, pair.key] where manager.fileExists(atPath: path) {
                    try manager.moveItem(atPath: path, toPath: path + ".before-restore-\(stamp)")
                }
                try Self.copyFile(folder + "/tls/tls.crt", to: pair.certificate, mode: 0o644)
                try Self.copyFile(folder + "/tls/tls.key", to: pair.key, mode: 0o600)
                lines.append("restored the TLS pair to \(pair.certificate)")
            } else {
                lines.append("kept the configured TLS pair at \(pair.certificate) (the backup's is in \(folder)/tls)")
            }
        }
        return lines
    }

    // MARK: Files

    /// Copies a folder's regular files (and subfolders), skipping files that vanish meanwhile (media deleted while
    /// the broker serves); the count and bytes copied. A missing folder copies nothing.
    static func copyTree(_ source: String, to target: String) throws -> (files: Int, bytes: Int) {
        let manager = FileManager.default
        var isFolder: ObjCBool = false
        guard manager.fileExists(atPath: source, isDirectory: &isFolder), isFolder.boolValue else { return (0, 0) }
        try manager.createDirectory(atPath: target, withIntermediateDirectories: true)
        var files = 0
        var bytes = 0
        for name in try manager.contentsOfDirectory(atPath: source).sorted() {
            let from = source + "/" + name
            let to = target + "/" + name
            guard let attributes = try? manager.attributesOfItem(atPath: from) else { continue }
            switch attributes[.type] as? FileAttributeType {
            case .typeDirectory?:
                let copied = try copyTree(from, to: to)
                (files, bytes) = (files + copied.files, bytes + copied.bytes)
            case .typeRegular?:
                guard let data = try? Data(contentsOf: URL(fileURLWithPath: from)) else { continue }
                try data.write(to: URL(fileURLWithPath: to))
                files += 1
                bytes += data.count
            default:
                continue
            }
        }
        return (files, bytes)
    }

    static func copyFile(_ source: String, to target: String, mode: Int) throws {
        try write(try Data(contentsOf: URL(fileURLWithPath: source)), to: target, mode: mode)
    }

    /// Writes a new file with `mode` from its first byte (a key is never readable by others, not even briefly).
    static func write(_ data: Data, to path: String, mode: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: mode]) else {
            throw CommandFailure("cannot create \(path)")
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.write(contentsOf: data)
        try handle.synchronize()
    }
}
