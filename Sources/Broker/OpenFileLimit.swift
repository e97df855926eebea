import Foundation
import Gateway
import Logging

/// The process's open-file limit, raised to what the system allows, and the connections it leaves room for.
enum OpenFileLimit {
    /// Descriptors kept back from the listeners: the store, APNs connections, the admin listener, logs.
    static let reserve = 512

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft limit in force afterwards.
    @discardableResult
    static func raise(logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        let before = limit.rlim_cur
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 {
                logger.warning("cannot raise the open-file limit", metadata: ["limit.soft": "\(before)"])
                limit.rlim_cur = before
            }
        }
        logger.debug(
            "open-file limit",
            metadata: ["limit.soft": "\(limit.rlim_cur)", "limit.hard": "\(limit.rlim_max)"]
        )
        return Int(clamping: limit.rlim_cur)
    }

    /// `limits` with its total cut to fit the descriptors the process has, less the reserve.
    static func fitted(_ limits: ConnectionLimits, softLimit: Int, logger: Logger) -> ConnectionLimits {
        var fitted = limits
        let room = max(64, softLimit - reserve)
        if room < limits.maxConnections {
            fitted.maxConnections = room
            logger.notice(
                "fewer connections than configured: the open-file limit leaves room for this many",
                metadata: ["connections.max": "\(room)", "limit.soft": "\(softLimit)"]
            )
        }
        fitted.maxConnectionsPerAddress = min(fitted.maxConnectionsPerAddress, fitted.maxConnections)
        return fitted
    }
}
