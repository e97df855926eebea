import Crypto
import Foundation
import Logging
import NIOSSL
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The REST listener's TLS context, replaced when its certificate or key files change: each new connection takes
/// the context current at its accept, and open connections keep theirs until they end. A pair that does not load
/// (half written, a key that does not match) is refused with an error in the log, and the old pair stays.
public final class ServerTLS: Sendable {
    let files: TLSFiles
    private let state: Mutex<(context: NIOSSLContext, stamp: FileStamp, expiry: Date?)>

    /// What identifies the files' current contents: a digest of each, read through any symbolic links.
    ///
    /// Not their size and modification time: Kubernetes rotates a mounted Secret by pointing the volume's hidden
    /// `..data` link at a new folder, and `tls.crt` stays the same link (`..data/tls.crt`) with the same time of
    /// its own; the old certificate was served long after a rotation. The files are a few kilobytes, read every
    /// `tlsReloadInterval`.
    struct FileStamp: Equatable {
        var certificate: SHA256Digest?
        var key: SHA256Digest?

        init(_ files: TLSFiles) {
            func digest(_ path: String) -> SHA256Digest? {
                // Data(contentsOf:) follows links, as opening the file for the context does.
                guard let contents = try? Data(contentsOf: URL(fileURLWithPath: path)) else { return nil }
                return SHA256.hash(data: contents)
            }
            certificate = digest(files.certificatePath)
            key = digest(files.privateKeyPath)
        }
    }

    public init(files: TLSFiles) throws {
        self.files = files
        let stamp = FileStamp(files)
        state = Mutex((try Self.context(files), stamp, files.certificateExpiry()))
    }

    /// The context a new connection uses.
    var context: NIOSSLContext { state.withLock { $0.context } }

    /// When the certificate new connections are served expires: the one loaded, not whatever the files hold now
    /// (a pair on disk that does not load is not served, and its expiry must not reassure the expiry alert).
    public var servedExpiry: Date? { state.withLock { $0.expiry } }

    private static func context(_ files: TLSFiles) throws -> NIOSSLContext {
        let configuration = try files.serverConfiguration()
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSSetupError(message: "the TLS certificate and key do not make a context: \(error)")
        }
    }

    /// Loads the files again; true when the context was replaced. With `onlyIfChanged`, files whose contents have
    /// not changed since the last load (or the last failed one) do not make a new context.
    @discardableResult
    public func reload(onlyIfChanged: Bool = false) throws -> Bool {
        let stamp = FileStamp(files)
        if onlyIfChanged, state.withLock({ $0.stamp }) == stamp { return false }
        do {
            let context = try Self.context(files)
            let expiry = files.certificateExpiry()
            state.withLock { $0 = (context, stamp, expiry) }
            return true
        } catch {
            // Not tried again until the files change once more.
            state.withLock { $0.stamp = stamp }
            throw error
        }
    }
}

/// Reloads the REST listener's certificate on SIGHUP and when its files change (looked at every `interval`).
struct TLSReloader: Service {
    let tls: ServerTLS
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in signals { reload(onlyIfChanged: false, cause: "SIGHUP") }
                }
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: interval) } catch { return }
                        reload(onlyIfChanged: true, cause: "the files changed")
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    private func reload(onlyIfChanged: Bool, cause: String) {
        do {
            guard try tls.reload(onlyIfChanged: onlyIfChanged) else { return }
            logger.notice(
                "TLS certificate reloaded; new connections use it, open ones keep theirs",
                metadata: [
                    "cause": "\(cause)", "tls.certificate": "\(tls.files.certificatePath)",
                    "expires":
                        "\(tls.servedExpiry.map { ISO8601DateFormatter().string(from: $0) } ?? "?")",
                ]
            )
        } catch {
            logger.error(
                "cannot reload the TLS certificate; the previous one stays in use",
                metadata: ["cause": "\(cause)", "error": "\(error)"]
            )
        }
    }
}
