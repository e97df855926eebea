import Foundation

/// How an impulse is consumed.
public enum ImpulseAction: String, Sendable, Codable {
    case read, `do`
}

/// One exercise of a tenant's catalog, with every field of the original API plus its life area and series position.
public struct Impulse: Sendable, Equatable {
    public var tenant: TenantID
    public var id: ImpulseID
    public var language: String
    public var title: String
    public var descriptionShort: String
    public var description: String
    public var durationMinutes: Int
    public var action: ImpulseAction
    /// `true` for a stand-alone impulse, `false` for a step of a series delivered in order.
    public var single: Bool
    /// In display order; absolute, or relative to the media base (`/media/...`).
    public var imageURLs: [String]
    public var videoURL: String?
    public var webURL: String?
    public var lifeArea: LifeArea
    /// The series this impulse belongs to (required when `single` is false).
    public var series: String?
    /// The 1-based step within its series.
    public var seriesPosition: Int?
    /// A retired impulse is no longer chosen for anyone; the deliveries that name it keep showing it.
    public var retired: Bool

    public init(
        tenant: TenantID,
        id: ImpulseID,
        language: String,
        title: String,
        descriptionShort: String,
        description: String,
        durationMinutes: Int,
        action: ImpulseAction,
        single: Bool,
        imageURLs: [String],
        videoURL: String?,
        webURL: String?,
        lifeArea: LifeArea,
        series: String? = nil,
        seriesPosition: Int? = nil,
        retired: Bool = false
    ) throws(EngineError) {
        guard !title.isEmpty, title.count <= 200 else {
            throw EngineError(.invalidInput, "\(id): title must be 1-200 characters")
        }
        guard descriptionShort.count <= 1000, description.count <= 100_000 else {
            throw EngineError(.invalidInput, "\(id): description is too long")
        }
        guard (0...1440).contains(durationMinutes) else {
            throw EngineError(.invalidInput, "\(id): duration must be 0-1440 minutes")
        }
        if !single {
            guard let series, !series.isEmpty, let seriesPosition, seriesPosition >= 1 else {
                throw EngineError(
                    .invalidInput,
                    "\(id): a series impulse (single: false) needs series and seriesPosition >= 1"
                )
            }
        }
        for url in imageURLs + [videoURL, webURL].compactMap({ $0 }) where !Self.isAcceptableURL(url) {
            throw EngineError(.invalidInput, "\(id): '\(url.prefix(100))' is not an http(s) URL or a /media/ path")
        }
        self.tenant = tenant
        self.id = id
        self.language = try validatedLanguage(language)
        self.title = title
        self.descriptionShort = descriptionShort
        self.description = description
        self.durationMinutes = durationMinutes
        self.action = action
        self.single = single
        self.imageURLs = imageURLs
        self.videoURL = videoURL
        self.webURL = webURL
        self.lifeArea = lifeArea
        self.series = single ? nil : series
        self.seriesPosition = single ? nil : seriesPosition
        self.retired = retired
    }

    static func isAcceptableURL(_ text: String) -> Bool {
        if text.hasPrefix("/media/") { return !text.contains("..") }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else { return false }
        return (scheme == "https" || scheme == "http") && url.host != nil
    }
}
