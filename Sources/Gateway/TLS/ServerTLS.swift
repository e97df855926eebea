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
    private let state: Mutex<(context: NIOSSLContext, stamp: FileStamp)>

    /// What identifies the files' current contents without reading them: size and modification time of each.
    struct FileStamp: Equatable {
        var certificate: [Double]
        var key: [Double]

        init(_ files: TLSFiles) {
            func stamp(_ path: String) -> [Double] {
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return [] }
                let size = (attributes[.size] as? Int).map(Double.init) ?? -1
                let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? -1
                return [size, modified]
            }
            certificate = stamp(files.certificatePath)
            key = stamp(files.privateKeyPath)
        }
    }

    public init(files: TLSFiles) throws {
        self.files = files
        let stamp = FileStamp(files)
        state = Mutex((try Self.context(files), stamp))
    }

    /// The context a new connection uses.
    var context: NIOSSLContext { state.withLock { $0.context } }

    private static func context(_ files: TLSFiles) throws -> NIOSSLContext {
        let configuration = try files.serverConfiguration()
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSSetupError(message: "the TLS certificate and key do not make a context: \(error)")
        }
    }

    /// Loads the files again; true when the context was replaced. With `onlyIfChanged`, files whose size and
    /// modification time have not changed are not read.
    @discardableResult
    public func reload(onlyIfChanged: Bool = false) throws -> Bool {
        let stamp = FileStamp(files)
        if onlyIfChanged, state.withLock({ $0.stamp }) == stamp { return false }
        do {
            let context = try Self.context(files)
            state.withLock { $0 = (context, stamp) }
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
                        "\(tls.files.certificateExpiry().map { ISO8601DateFormatter().string(from: $0) } ?? "?")",
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
