/// A tenant's identifier: a lower-case slug that also appears in URL paths (`/t/{tenant}/`).
public struct TenantID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public let rawValue: String

    /// Validates the slug: 1-63 characters of `a-z`, `0-9` and `-`, not starting with `-`.
    public init(_ rawValue: String) throws(EngineError) {
        guard Self.isValid(rawValue) else {
            throw EngineError(.invalidInput, "tenant id must be 1-63 characters of a-z, 0-9 and '-'")
        }
        self.rawValue = rawValue
    }

    init(trusted rawValue: String) { self.rawValue = rawValue }

    public static func isValid(_ value: String) -> Bool {
        guard (1...63).contains(value.utf8.count), value.utf8.first != UInt8(ascii: "-") else { return false }
        return value.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
    }

    public var description: String { rawValue }
    public static func < (lhs: TenantID, rhs: TenantID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer().decode(String.self)
        self = try TenantID(value)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A user's store-wide numeric identifier. Usernames are only unique within a tenant.
public struct UserID: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public var description: String { String(rawValue) }
}

/// An impulse's identifier (`workingID` in the original API), unique within a tenant's catalog.
public struct ImpulseID: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) throws(EngineError) {
        guard (1...128).contains(rawValue.utf8.count), !rawValue.contains(where: { $0.isNewline || $0 == "/" }) else {
            throw EngineError(.invalidInput, "impulse id must be 1-128 characters without '/' or line breaks")
        }
        self.rawValue = rawValue
    }

    init(trusted rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

/// A delivery's store-wide sequence number; later deliveries have larger numbers.
public struct DeliveryID: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public var description: String { String(rawValue) }
    public static func < (lhs: DeliveryID, rhs: DeliveryID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A device's address on its push channel. APNs: an even number of hex digits, kept lower-case. FCM: a registration
/// token or a Firebase Installation ID, kept as written (they are case-sensitive): 20-4096 characters of
/// letters, digits and `-_:.`.
///
/// Its `description` is redacted so that a token never reaches a log line by accident;
/// use ``rawValue`` only where the full token is needed (the store and the push transport).
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ text: String, channel: PushChannel = .apns) throws(EngineError) {
        let bytes = text.utf8
        switch channel {
        case .apns:
            let isHex = bytes.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || ($0 >= 0x41 && $0 <= 0x46)
            }
            // APNs tokens are 32 bytes today; Apple documents them as variable length, so accept 8-200 bytes.
            guard isHex, bytes.count % 2 == 0, (16...400).contains(bytes.count) else {
                throw EngineError(.invalidInput, "device token must be an even number (16-400) of hex digits")
            }
            self.rawValue = text.lowercased()
        case .fcm:
            // Registration tokens are about 160 characters today and FIDs 22; neither length is documented.
            let allowed = bytes.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
                    || $0 == 0x2D || $0 == 0x5F || $0 == 0x3A || $0 == 0x2E
            }
            guard allowed, (20...4096).contains(bytes.count) else {
                throw EngineError(
                    .invalidInput,
                    "an FCM registration token or installation id is 20-4096 letters, digits, '-', '_', ':' or '.'"
                )
            }
            self.rawValue = text
        }
    }

    init(trusted rawValue: String) { self.rawValue = rawValue }

    /// A token of either channel, told apart by its form (an unregister names no channel): an APNs token (hex)
    /// if it is one, else an FCM one.
    public init(anyChannel text: String) throws(EngineError) {
        do {
            try self.init(text, channel: .apns)
        } catch {
            do {
                try self.init(text, channel: .fcm)
            } catch {
                throw EngineError(
                    .invalidInput,
                    "device token must be an APNs token (16-400 hex digits) or an FCM registration token or installation id"
                )
            }
        }
    }

    /// The first and last four digits only.
    public var redacted: String { "\(rawValue.prefix(4))…\(rawValue.suffix(4))" }
    public var description: String { redacted }
}
