import Foundation

/// The kinds of file a tenant may upload to its media folder, each recognised by its name's extension, its
/// `Content-Type` and its first bytes. No markup (SVG, HTML): the folder is served from the API's own origin.
public enum MediaKind: String, Sendable, CaseIterable, Codable {
    case jpeg, png, gif, webp, heic, mp4, mov, mp3, m4a, aac, wav, caf, pdf

    /// The extensions that name the kind.
    public var extensions: [String] {
        switch self {
        case .jpeg: ["jpg", "jpeg"]
        case .mp4: ["mp4", "m4v"]
        default: [rawValue]
        }
    }

    /// The `Content-Type` an upload states and the folder serves.
    public var contentType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .heic: "image/heic"
        case .mp4: "video/mp4"
        case .mov: "video/quicktime"
        case .mp3: "audio/mpeg"
        case .m4a: "audio/mp4"
        case .aac: "audio/aac"
        case .wav: "audio/wav"
        case .caf: "audio/x-caf"
        case .pdf: "application/pdf"
        }
    }

    /// The kind a file name's extension names, if any.
    public init?(extensionOf name: String) {
        guard let dot = name.lastIndex(of: ".") else { return nil }
        let suffix = name[name.index(after: dot)...].lowercased()
        guard let kind = Self.allCases.first(where: { $0.extensions.contains(suffix) }) else { return nil }
        self = kind
    }

    /// How many first bytes ``matches(_:)`` needs to decide.
    public static let signatureLength = 12

    /// Whether a file's first bytes (at least ``signatureLength`` of them, or the whole file) are of this kind.
    public func matches(_ head: some Collection<UInt8>) -> Bool {
        let bytes = Array(head.prefix(Self.signatureLength))
        func starts(_ prefix: [UInt8], at offset: Int = 0) -> Bool {
            bytes.count >= offset + prefix.count && Array(bytes[offset..<offset + prefix.count]) == prefix
        }
        let ftyp = starts(Array("ftyp".utf8), at: 4)
        switch self {
        case .jpeg: return starts([0xFF, 0xD8, 0xFF])
        case .png: return starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case .gif: return starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8))
        case .webp: return starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8)
        case .wav: return starts(Array("RIFF".utf8)) && starts(Array("WAVE".utf8), at: 8)
        case .heic, .mp4, .mov, .m4a: return ftyp || (self == .mov && starts(Array("moov".utf8), at: 4))
        case .mp3: return starts(Array("ID3".utf8)) || (bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0)
        case .aac: return bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xF6 == 0xF0
        case .caf: return starts(Array("caff".utf8))
        case .pdf: return starts(Array("%PDF-".utf8))
        }
    }
}

/// A file name in a tenant's media folder: 1-128 characters of `A-Z a-z 0-9 . _ -`, not starting with a dot,
/// ending in the extension of a ``MediaKind``. No folders: a tenant's media folder is flat.
public struct MediaName: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let rawValue: String
    public let kind: MediaKind

    public init(_ rawValue: String) throws(EngineError) {
        let allowed = rawValue.utf8.allSatisfy { byte in
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
        guard (1...128).contains(rawValue.utf8.count), allowed, rawValue.utf8.first != UInt8(ascii: ".") else {
            throw EngineError(
                .invalidInput,
                "a media file name is 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'"
            )
        }
        guard let kind = MediaKind(extensionOf: rawValue) else {
            let known = MediaKind.allCases.flatMap(\.extensions).joined(separator: ", ")
            throw EngineError(.invalidInput, "a media file name ends in one of \(known)")
        }
        self.rawValue = rawValue
        self.kind = kind
    }

    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Where the tenant's file is served (below the public media folder).
    public func path(tenant: TenantID) -> String { "/media/\(tenant.rawValue)/\(rawValue)" }
}

/// One file of a tenant's media folder.
public struct MediaFile: Sendable, Equatable, Codable {
    public var name: String
    /// The path it is served at: `/media/{tenant}/{name}`.
    public var path: String
    public var contentType: String
    public var size: Int
    public var modifiedAt: Date

    public init(name: MediaName, tenant: TenantID, size: Int, modifiedAt: Date) {
        self.name = name.rawValue
        self.path = name.path(tenant: tenant)
        self.contentType = name.kind.contentType
        self.size = size
        self.modifiedAt = modifiedAt
    }
}

/// A file being written: nothing is visible at its name until ``commit(quota:)``; ``abort()`` leaves no trace.
public protocol MediaUpload: Sendable {
    /// Holds `bytes` more of the tenant's quota for this upload before they are written: refused (413) when the
    /// tenant's files and every upload of the tenant in progress would take more than `quota`.
    func reserve(_ bytes: Int, quota: Int) async throws
    func write(_ bytes: [UInt8]) async throws
    /// Makes the file visible under its name (replacing a file of that name whole); true when it is new. Checked
    /// once more against the tenant's files as they are then, one commit at a time: refused (413) past `quota`.
    func commit(quota: Int) async throws -> Bool
    func abort() async
}

/// The bytes that uploads in progress hold of their tenants' quotas (``MediaUpload/reserve(_:quota:)``), by
/// tenant folder and upload. A pure value; its owner keeps it behind a lock.
public struct MediaQuotaLedger: Sendable {
    private var reserved: [String: [UUID: Int]] = [:]

    public init() {}

    /// Adds `bytes` to the upload's reservation when the tenant's files (`used`, without the file the upload
    /// replaces) and all of the tenant's reservations still fit in `quota`; false (and nothing held) otherwise.
    public mutating func reserve(_ bytes: Int, upload: UUID, folder: String, used: Int, quota: Int) -> Bool {
        guard used + held(folder: folder) + bytes <= quota else { return false }
        reserved[folder, default: [:]][upload, default: 0] += bytes
        return true
    }

    /// The upload ended (committed, refused or broken): its reservation goes.
    public mutating func release(upload: UUID, folder: String) {
        reserved[folder]?[upload] = nil
        if reserved[folder]?.isEmpty == true { reserved[folder] = nil }
    }

    /// What the tenant's uploads in progress hold.
    public func held(folder: String) -> Int { reserved[folder, default: [:]].values.reduce(0, +) }

    /// The refusal both checks answer.
    public static func refusal(quota: Int) -> EngineError {
        EngineError(.tooLarge, "the tenant's media would take more than its quota of \(quota) bytes")
    }
}

/// The tenants' media folders (files on disk in the broker; the store port the administration writes them with).
public protocol MediaStore: Sendable {
    func media(tenant: TenantID) async throws -> [MediaFile]
    func beginUpload(tenant: TenantID, name: MediaName) async throws -> any MediaUpload
    /// Removes the file; false when there was none.
    func deleteMedia(tenant: TenantID, name: MediaName) async throws -> Bool
    /// Removes every file of the tenant (the tenant was deleted); how many there were.
    func deleteAll(tenant: TenantID) async throws -> Int
}

/// The bounds of a tenant's media.
public struct MediaLimits: Sendable {
    /// The largest file.
    public var fileSize: Int
    /// The most all of one tenant's files may take.
    public var tenantQuota: Int

    public init(fileSize: Int, tenantQuota: Int) {
        self.fileSize = fileSize
        self.tenantQuota = tenantQuota
    }
}
