import Engine
import Foundation
import NIOPosix
import Synchronization

/// The tenants' uploaded media on disk: `<folder>/<tenant>/<name>`, served by ``MediaFiles`` at
/// `/media/<tenant>/<name>`. An upload is written to a hidden file of the tenant's folder (never served: the
/// folder serves no dot file) and renamed over its name when complete, so a reader sees the old file or the
/// new one whole. All file work runs on the thread pool.
public struct MediaFolder: MediaStore {
    let folder: String

    public init(folder: String) { self.folder = folder }

    func tenantFolder(_ tenant: TenantID) -> String { folder + "/" + tenant.rawValue }

    public func media(tenant: TenantID) async throws -> [MediaFile] {
        let directory = tenantFolder(tenant)
        return try await Self.blocking {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
            return names.compactMap { text -> MediaFile? in
                guard let name = try? MediaName(text) else { return nil }
                var info = stat()
                guard stat(directory + "/" + text, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
                return MediaFile(
                    name: name,
                    tenant: tenant,
                    size: Int(info.st_size),
                    modifiedAt: Date(timeIntervalSince1970: TimeInterval(info.st_mtim.tv_sec))
                )
            }
        }
    }

    public func beginUpload(tenant: TenantID, name: MediaName) async throws -> any MediaUpload {
        let directory = tenantFolder(tenant)
        let id = UUID()
        let temporary = directory + "/.upload-" + id.uuidString
        let (descriptor, used) = try await Self.blocking {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else {
                throw EngineError(.storage, "cannot write to the media folder (errno \(errno))")
            }
            // A file the upload replaces does not count against the quota.
            return (descriptor, Self.bytesUsed(directory, except: name.rawValue))
        }
        return Upload(
            id: id,
            descriptor: descriptor,
            folder: directory,
            temporary: temporary,
            name: name.rawValue,
            used: used
        )
    }

    /// What the uploads of this process hold of their tenants' quotas, by tenant folder.
    static let reservations = Mutex(MediaQuotaLedger())
    /// One commit at a time (in this process): each checks the quota against the files as the previous left them.
    static let commits = Mutex(())

    /// The bytes of a tenant folder's files, hidden files (uploads in progress) and `except` left out.
    static func bytesUsed(_ directory: String, except name: String) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        return names.reduce(0) { total, text in
            guard text != name, !text.hasPrefix(".") else { return total }
            var info = stat()
            guard stat(directory + "/" + text, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return total }
            return total + Int(info.st_size)
        }
    }

    public func deleteMedia(tenant: TenantID, name: MediaName) async throws -> Bool {
        let path = tenantFolder(tenant) + "/" + name.rawValue
        return try await Self.blocking { unlink(path) == 0 }
    }

    /// Removes the tenant's folder with everything in it (the tenant was deleted); how many files it held.
    public func deleteAll(tenant: TenantID) async throws -> Int {
        let count = try await media(tenant: tenant).count
        let directory = tenantFolder(tenant)
        try await Self.blocking {
            if FileManager.default.fileExists(atPath: directory) {
                try FileManager.default.removeItem(atPath: directory)
            }
        }
        return count
    }

    static func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    /// Runs even when the calling task is cancelled (the async `runIfActive` then skips its work): closing a
    /// descriptor and removing a partial file must happen for an upload whose client went away.
    static func blockingToEnd<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.any(), work)
            .get()
    }

    /// One upload's hidden file, and the quota it holds.
    actor Upload: MediaUpload {
        let id: UUID
        var descriptor: Int32?
        let folder: String
        let temporary: String
        let name: String
        /// The tenant's files when the upload began, without the one it replaces.
        let used: Int
        private var size = 0

        init(id: UUID, descriptor: Int32, folder: String, temporary: String, name: String, used: Int) {
            self.id = id
            self.descriptor = descriptor
            self.folder = folder
            self.temporary = temporary
            self.name = name
            self.used = used
        }

        func reserve(_ bytes: Int, quota: Int) throws {
            let (id, folder, used) = (id, folder, used)
            let held = MediaFolder.reservations.withLock {
                $0.reserve(bytes, upload: id, folder: folder, used: used, quota: quota)
            }
            guard held else { throw MediaQuotaLedger.refusal(quota: quota) }
        }

        func write(_ bytes: [UInt8]) async throws {
            guard let descriptor else { throw EngineError(.storage, "the upload is closed") }
            size += bytes.count
            try await MediaFolder.blocking {
                var written = 0
                while written < bytes.count {
                    let count = bytes.withUnsafeBytes { raw in
                        Foundation.write(descriptor, raw.baseAddress! + written, raw.count - written)
                    }
                    if count < 0 {
                        if errno == EINTR { continue }
                        throw EngineError(.storage, "cannot write to the media folder (errno \(errno))")
                    }
                    written += count
                }
            }
        }

        func commit(quota: Int) async throws -> Bool {
            guard let descriptor else { throw EngineError(.storage, "the upload is closed") }
            self.descriptor = nil
            defer { release() }
            let (temporary, folder, name, size) = (temporary, folder, name, size)
            return try await MediaFolder.blockingToEnd {
                defer { close(descriptor) }
                guard fsync(descriptor) == 0 else {
                    unlink(temporary)
                    throw EngineError(.storage, "cannot write to the media folder (errno \(errno))")
                }
                let target = folder + "/" + name
                return try MediaFolder.commits.withLock { _ in
                    guard MediaFolder.bytesUsed(folder, except: name) + size <= quota else {
                        unlink(temporary)
                        throw MediaQuotaLedger.refusal(quota: quota)
                    }
                    let existed = access(target, F_OK) == 0
                    guard rename(temporary, target) == 0 else {
                        unlink(temporary)
                        throw EngineError(.storage, "cannot write to the media folder (errno \(errno))")
                    }
                    return !existed
                }
            }
        }

        private func release() {
            let (id, folder) = (id, folder)
            MediaFolder.reservations.withLock { $0.release(upload: id, folder: folder) }
        }

        func abort() async {
            guard let descriptor else { return }
            self.descriptor = nil
            release()
            let temporary = temporary
            _ = try? await MediaFolder.blockingToEnd {
                close(descriptor)
                unlink(temporary)
            }
        }
    }
}
