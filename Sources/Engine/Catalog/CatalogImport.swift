import Foundation

/// Reads an impulse catalog in the `items` format of the original API, plus `lifeArea` (and `series`,
/// `seriesPosition` for impulses with `single: false`).
///
/// The whole file is validated before anything is written: one bad item rejects the import with its index.
public enum CatalogImport {
    struct File: Decodable {
        var items: [Item]
    }

    /// One impulse as the format writes it (also what the console's form fills in).
    public struct Item: Decodable, Sendable {
        public var workingID: String
        public var language: String
        public var title: String
        public var descriptionShort: String
        public var description: String
        public var duration: Int
        public var action: String
        public var single: Bool
        public var imageURLs: [String]?
        public var videoURL: String?
        public var webURL: String?
        public var lifeArea: String
        public var series: String?
        public var seriesPosition: Int?

        public init(
            workingID: String,
            language: String,
            title: String,
            descriptionShort: String,
            description: String,
            duration: Int,
            action: String,
            single: Bool,
            imageURLs: [String]?,
            videoURL: String?,
            webURL: String?,
            lifeArea: String,
            series: String?,
            seriesPosition: Int?
        ) {
            self.workingID = workingID
            self.language = language
            self.title = title
            self.descriptionShort = descriptionShort
            self.description = description
            self.duration = duration
            self.action = action
            self.single = single
            self.imageURLs = imageURLs
            self.videoURL = videoURL
            self.webURL = webURL
            self.lifeArea = lifeArea
            self.series = series
            self.seriesPosition = seriesPosition
        }
    }

    public static func parse(_ data: Data, tenant: TenantID) throws(EngineError) -> [Impulse] {
        try parse(try decode(File.self, data).items, tenant: tenant)
    }

    /// One item of the format (`PUT` of one impulse in the admin API).
    public static func parseItem(_ data: Data, tenant: TenantID) throws(EngineError) -> Impulse {
        try parseItem(try decode(Item.self, data), tenant: tenant)
    }

    public static func parseItem(_ item: Item, tenant: TenantID) throws(EngineError) -> Impulse {
        try parse([item], tenant: tenant)[0]
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws(EngineError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw EngineError(.invalidInput, "catalog is not valid: \(describe(error))")
        } catch {
            throw EngineError(.invalidInput, "catalog is not valid JSON")
        }
    }

    static func parse(_ items: [Item], tenant: TenantID) throws(EngineError) -> [Impulse] {
        var seen = Set<String>()
        var impulses: [Impulse] = []
        for (index, item) in items.enumerated() {
            do throws(EngineError) {
                guard seen.insert(item.workingID).inserted else {
                    throw EngineError(.invalidInput, "workingID '\(item.workingID)' appears twice")
                }
                guard let area = LifeArea(rawValue: item.lifeArea) else {
                    let names = LifeArea.allCases.map(\.rawValue).joined(separator: ", ")
                    throw EngineError(.invalidInput, "lifeArea '\(item.lifeArea.prefix(40))' is not one of \(names)")
                }
                guard let action = ImpulseAction(rawValue: item.action.lowercased()) else {
                    throw EngineError(.invalidInput, "action must be 'read' or 'do'")
                }
                impulses.append(
                    try Impulse(
                        tenant: tenant,
                        id: ImpulseID(item.workingID),
                        language: item.language,
                        title: item.title,
                        descriptionShort: item.descriptionShort,
                        description: item.description,
                        durationMinutes: item.duration,
                        action: action,
                        single: item.single,
                        imageURLs: item.imageURLs ?? [],
                        videoURL: item.videoURL,
                        webURL: item.webURL,
                        lifeArea: area,
                        series: item.series,
                        seriesPosition: item.seriesPosition
                    )
                )
            } catch {
                throw EngineError(.invalidInput, "item \(index): \(error.message)")
            }
        }
        return impulses
    }

    /// Checks that every image and video URL under `/media/` names a file the media folder serves (`exists` is
    /// given the path below `/media/`, still percent-encoded); absolute URLs elsewhere are not checked. The first
    /// missing one is an error naming the item's index and the path.
    public static func checkMedia(_ impulses: [Impulse], exists: (String) -> Bool) throws(EngineError) {
        let prefix = "/media/"
        for (index, impulse) in impulses.enumerated() {
            let linked = impulse.imageURLs.map { ("image", $0) } + (impulse.videoURL.map { [("video", $0)] } ?? [])
            for (kind, url) in linked where url.hasPrefix(prefix) {
                guard exists(String(url.dropFirst(prefix.count))) else {
                    throw EngineError(
                        .invalidInput,
                        "item \(index): \(kind) \(url.prefix(200)) is not in the media folder"
                    )
                }
            }
        }
    }

    /// A decoding error's path and kind, without echoing the input.
    public static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let text = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            return text.isEmpty ? "the document" : text
        }
        switch error {
        case .keyNotFound(let key, let context): return "\(path(context)): missing member '\(key.stringValue)'"
        case .typeMismatch(let type, let context): return "\(path(context)): expected \(type)"
        case .valueNotFound(let type, let context): return "\(path(context)): expected \(type), found null"
        case .dataCorrupted(let context): return "\(path(context)): malformed (\(context.debugDescription.prefix(80)))"
        @unknown default: return "malformed"
        }
    }
}
