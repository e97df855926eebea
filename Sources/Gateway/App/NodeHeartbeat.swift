import Engine
import Foundation
import Logging
import ServiceLifecycle

/// Keeps this node's claims and leases alive in a shared store and ends those of silent nodes, so a killed node's
/// work is taken over within seconds (`nodeSilence`), not when its claims and leases run out.
///
/// At start it ends its previous incarnation's claims and leases at once (its id is kept in the data folder); at the
/// end of a graceful stop, after the push gateway has drained, it ends its own, so what it had not pushed goes to the
/// other nodes at once. Runs first among the services and so stops last.
final class NodeHeartbeat: Service, Sendable {
    let membership: any NodeMembership
    let host: String
    /// Where this node's id is kept for its next incarnation (nil: nowhere).
    let idFile: String?
    let logger: Logger
    let now: @Sendable () -> Date
    /// Called when another node has gone (ended here, or by its own graceful stop): its work is free to take now.
    let onTakeover: @Sendable () -> Void

    init(
        membership: any NodeMembership,
        dataDirectory: String?,
        logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init,
        onTakeover: @escaping @Sendable () -> Void
    ) {
        self.membership = membership
        self.onTakeover = onTakeover
        self.host = ProcessInfo.processInfo.hostName
        self.idFile = dataDirectory.map { $0 + "/node-id" }
        self.logger = logger
        self.now = now
    }

    func run() async throws {
        await endPreviousIncarnation()
        await cancelWhenGracefulShutdown { await self.beat() }
        do {
            let ended = try await membership.endNode(membership.nodeID)
            logger.notice("this node's claims and leases handed back", metadata: Self.metadata(ended))
        } catch {
            logger.warning(
                "cannot hand back this node's claims and leases; they end with the heartbeat's silence",
                metadata: ["error": "\(error)"]
            )
        }
    }

    /// Heartbeats until cancelled; a failing store is tried again after the interval, with an error at the first
    /// failure and a notice at its recovery (not a line at every beat).
    func beat() async {
        var failing = false
        var known: Set<String> = []
        while !Task.isCancelled {
            do {
                let beat = try await membership.heartbeat(host: host, now: now())
                if failing {
                    logger.notice("node heartbeat recorded again")
                    failing = false
                }
                // A node gone since the last beat (ended here or stopped) left work behind: take it now, not at
                // the next sweep.
                if !beat.ended.isEmpty || !known.subtracting(beat.live).isEmpty { onTakeover() }
                known = beat.live
                for node in beat.ended {
                    logger.warning(
                        "a silent node's claims and leases ended; other nodes take its work",
                        metadata: Self.metadata(node)
                    )
                }
            } catch {
                if !failing {
                    logger.error(
                        "cannot record this node's heartbeat; other nodes may take over its work",
                        metadata: ["error": "\(error)"]
                    )
                }
                failing = true
            }
            do { try await Task.sleep(for: membership.heartbeatInterval) } catch { return }
        }
    }

    static func metadata(_ ended: EndedNode) -> Logger.Metadata {
        ["node": "\(ended.id)", "claims": "\(ended.claims)", "leases": "\(ended.leases)"]
    }

    private func endPreviousIncarnation() async {
        guard let idFile else { return }
        if let data = FileManager.default.contents(atPath: idFile) {
            let previous = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !previous.isEmpty, previous != membership.nodeID {
                do {
                    let ended = try await membership.endNode(previous)
                    if ended.claims + ended.leases > 0 {
                        logger.notice(
                            "the previous run's claims and leases ended at start",
                            metadata: Self.metadata(ended)
                        )
                        // The scheduler's sweep at start may have looked before they were free.
                        onTakeover()
                    }
                } catch {
                    logger.warning(
                        "cannot end the previous run's claims and leases; they end with its silence",
                        metadata: ["error": "\(error)"]
                    )
                }
            }
        }
        if !FileManager.default.createFile(atPath: idFile, contents: Data(membership.nodeID.utf8)) {
            logger.warning("cannot keep this node's id for its next start", metadata: ["file": "\(idFile)"])
        }
    }
}
