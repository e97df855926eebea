import Engine
import Foundation
import Hummingbird
import NIOCore

/// The catalog's pages (list, edit, add, import, retire) and the media folder's (list, upload, delete), on the
/// admin API's rules.
extension Console {
    func addCatalogRoutes(_ router: Router<BrokerRequestContext>) {
        router.get("/t/:tenant/console/catalog") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in try await catalogPage(visit)
            }
        }
        router.post("/t/:tenant/console/catalog/import") { request, context in
            try await form(request, context) { visit, fields in try await importCatalog(visit, fields) }
        }
        router.get("/t/:tenant/console/catalog/new") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in
                try impulsePage(visit, item: nil, isNew: true)
            }
        }
        router.post("/t/:tenant/console/catalog/new") { request, context in
            try await form(request, context) { visit, fields in try await saveImpulse(visit, id: nil, fields) }
        }
        router.get("/t/:tenant/console/catalog/:impulse/edit") { request, context in
            let id = try AdminAPI.impulseID(context)
            return try await page(request, context, tenant: try await tenant(context)) { visit in
                let impulse = try await administration.impulse(
                    tenant: try requireTenant(visit).id,
                    id: id,
                    by: visit.actor
                )
                return try impulsePage(visit, item: Self.item(impulse), isNew: false, retired: impulse.retired)
            }
        }
        router.post("/t/:tenant/console/catalog/:impulse/edit") { request, context in
            let id = try AdminAPI.impulseID(context)
            return try await form(request, context) { visit, fields in try await saveImpulse(visit, id: id, fields) }
        }
        router.post("/t/:tenant/console/catalog/:impulse/retired") { request, context in
            let id = try AdminAPI.impulseID(context)
            return try await form(request, context) { visit, fields in
                try await setRetired(visit, impulse: id, fields)
            }
        }
        router.get("/t/:tenant/console/media") { request, context in
            try await page(request, context, tenant: try await tenant(context)) { visit in try await mediaPage(visit) }
        }
        // Read as it arrives, within the upload deadline, like the admin API's upload.
        router.post("/t/:tenant/console/media") { request, context in
            try await RESTAPI.withDeadline(request, context, limit: configuration.uploadDeadline, streamed: true) {
                try await uploadMedia($0, context)
            }
        }
        router.post("/t/:tenant/console/media/:name/delete") { request, context in
            let name = try AdminAPI.mediaName(context)
            return try await form(request, context) { visit, _ in try await deleteMedia(visit, name: name) }
        }
    }

    // MARK: Catalog

    func catalogPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let base = "/t/\(tenant.id)/console/catalog"
        let impulses = try await administration.impulses(tenant: tenant.id, by: visit.actor).map {
            impulse -> [String: String] in
            let path = base + "/" + Self.segment(impulse.id.rawValue)
            return [
                "id": impulse.id.rawValue, "language": impulse.language, "title": impulse.title,
                "area": impulse.lifeArea.rawValue,
                "series": impulse.series.map { "\($0) \(impulse.seriesPosition.map(String.init) ?? "")" } ?? "",
                "state": impulse.retired ? "retired" : "in use", "editHref": path + "/edit",
                "action": path + "/retired", "retireTo": impulse.retired ? "false" : "true",
                "label": impulse.retired ? "Bring back" : "Retire", "csrf": visit.session.csrfToken,
            ]
        }
        let values: [String: Any] = [
            "impulses": impulses, "csrf": visit.session.csrfToken, "importAction": base + "/import",
            "newHref": base + "/new", "mediaHref": "/t/\(tenant.id)/console/media",
        ]
        return html(
            layout(
                title: "Catalog",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("catalog", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    func setRetired(_ visit: Visit, impulse: ImpulseID, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        _ = try await administration.setRetired(
            tenant: tenant.id,
            id: impulse,
            retired: fields["retired"] == "true",
            by: visit.actor
        )
        await changed(tenant.id, [.catalog])
        return redirect("/t/\(tenant.id)/console/catalog")
    }

    func importCatalog(_ visit: Visit, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        do {
            let (inserted, updated) = try await administration.importCatalog(
                tenant: tenant.id,
                Data((fields["document"] ?? "").utf8),
                mediaExists: mediaExists,
                by: visit.actor
            )
            await changed(tenant.id, [.catalog])
            return try await catalogPage(visit, notice: "Imported: \(inserted) added, \(updated) replaced.")
        } catch let error as EngineError {
            return try await catalogPage(
                visit,
                error: "Nothing was imported: \(error.message)",
                status: Problem(error).status
            )
        }
    }

    /// The form of one impulse: `item` filled in (nil: an empty form with the usual defaults).
    func impulsePage(
        _ visit: Visit,
        item: CatalogImport.Item?,
        isNew: Bool,
        retired: Bool = false,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) throws -> Response {
        let tenant = try requireTenant(visit)
        let base = "/t/\(tenant.id)/console/catalog"
        let item =
            item
            ?? CatalogImport.Item(
                workingID: "",
                language: "en",
                title: "",
                descriptionShort: "",
                description: "",
                duration: 5,
                action: ImpulseAction.read.rawValue,
                single: true,
                imageURLs: nil,
                videoURL: nil,
                webURL: nil,
                lifeArea: LifeArea.mindfulness.rawValue,
                series: nil,
                seriesPosition: nil
            )
        let values: [String: Any] = [
            "isNew": isNew, "retired": retired, "csrf": visit.session.csrfToken, "back": base,
            "action": isNew ? base + "/new" : base + "/" + Self.segment(item.workingID) + "/edit",
            "workingID": item.workingID, "language": item.language, "title": item.title,
            "descriptionShort": item.descriptionShort, "description": item.description,
            "duration": "\(item.duration)", "single": item.single, "series": item.series ?? "",
            "seriesPosition": item.seriesPosition.map(String.init) ?? "",
            "imageURLs": (item.imageURLs ?? []).joined(separator: "\n"), "videoURL": item.videoURL ?? "",
            "webURL": item.webURL ?? "",
            "actions": [ImpulseAction.read, .do].map {
                ["value": $0.rawValue, "selected": $0.rawValue == item.action.lowercased()] as [String: Any]
            },
            "areas": LifeArea.allCases.map {
                ["value": $0.rawValue, "selected": $0.rawValue == item.lifeArea] as [String: Any]
            },
        ]
        return html(
            layout(
                title: isNew ? "New impulse" : "Edit impulse",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: base),
                body: render("impulse", values),
                error: error
            ),
            status
        )
    }

    /// Saves the form as the admin API's `PUT` of one impulse would; a refused form comes back with what was typed.
    func saveImpulse(_ visit: Visit, id: ImpulseID?, _ fields: [String: String]) async throws -> Response {
        let tenant = try requireTenant(visit)
        let item = Self.item(fields, workingID: id?.rawValue ?? (fields["workingID"] ?? ""))
        do {
            guard let item else {
                throw EngineError(.invalidInput, "duration and position must be whole numbers")
            }
            let id = try id ?? ImpulseID(item.workingID)
            let (impulse, created) = try await administration.putImpulse(
                tenant: tenant.id,
                id: id,
                item,
                mediaExists: mediaExists,
                by: visit.actor
            )
            await changed(tenant.id, [.catalog])
            return try await catalogPage(visit, notice: "\(impulse.id) is \(created ? "added" : "saved").")
        } catch let error as EngineError {
            return try impulsePage(
                visit,
                item: item ?? Self.item(fields, workingID: fields["workingID"] ?? "", lenient: true),
                isNew: id == nil,
                error: error.message,
                status: Problem(error).status
            )
        }
    }

    /// The form's fields as a catalog item; nil when a number is not one (`lenient`: read as 0, to show the form
    /// again).
    static func item(_ fields: [String: String], workingID: String, lenient: Bool = false) -> CatalogImport.Item? {
        func text(_ name: String) -> String { (fields[name] ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }
        func optional(_ name: String) -> String? { text(name).isEmpty ? nil : text(name) }
        guard let duration = Int(text("duration")) ?? (lenient ? 0 : nil) else { return nil }
        var position: Int?
        if let value = optional("seriesPosition") {
            guard let number = Int(value) ?? (lenient ? 0 : nil) else { return nil }
            position = number
        }
        let images = text("imageURLs").split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return CatalogImport.Item(
            workingID: workingID,
            language: text("language"),
            title: text("title"),
            descriptionShort: text("descriptionShort"),
            description: fields["description"] ?? "",
            duration: duration,
            action: text("action"),
            single: fields["single"] == "true",
            imageURLs: images,
            videoURL: optional("videoURL"),
            webURL: optional("webURL"),
            lifeArea: text("lifeArea"),
            series: optional("series"),
            seriesPosition: position
        )
    }

    static func item(_ impulse: Impulse) -> CatalogImport.Item {
        CatalogImport.Item(
            workingID: impulse.id.rawValue,
            language: impulse.language,
            title: impulse.title,
            descriptionShort: impulse.descriptionShort,
            description: impulse.description,
            duration: impulse.durationMinutes,
            action: impulse.action.rawValue,
            single: impulse.single,
            imageURLs: impulse.imageURLs,
            videoURL: impulse.videoURL,
            webURL: impulse.webURL,
            lifeArea: impulse.lifeArea.rawValue,
            series: impulse.series,
            seriesPosition: impulse.seriesPosition
        )
    }

    var mediaExists: @Sendable (String) -> Bool {
        let folder = configuration.mediaDirectory
        return { path in folder.map { MediaFiles.serves(path, folder: $0) } ?? false }
    }

    // MARK: Media

    func mediaFolder() throws -> MediaFolder {
        guard let folder = configuration.mediaDirectory.map(MediaFolder.init(folder:)) else {
            throw EngineError(.notFound, "this broker serves no media folder (see mediaDirectory in the README)")
        }
        return folder
    }

    func mediaPage(
        _ visit: Visit,
        notice: String? = nil,
        error: String? = nil,
        status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let tenant = try requireTenant(visit)
        let base = "/t/\(tenant.id)/console/media"
        let files = try await administration.media(tenant: tenant.id, in: try mediaFolder(), by: visit.actor)
        let used = files.reduce(0) { $0 + $1.size }
        let values: [String: Any] = [
            "tenant": tenant.id.rawValue, "csrf": visit.session.csrfToken, "uploadAction": base,
            "kinds": MediaKind.allCases.flatMap(\.extensions).joined(separator: ", "),
            "quota": "\(Self.bytes(used)) of \(Self.bytes(configuration.mediaQuota)) used; a file is at most "
                + "\(Self.bytes(configuration.maxUploadSize)).",
            "files": files.map { file -> [String: String] in
                [
                    "name": file.name, "path": file.path, "type": file.contentType, "size": Self.bytes(file.size),
                    "modified": Self.time(file.modifiedAt, zone: tenant.defaultTimeZone),
                    "deleteAction": base + "/" + Self.segment(file.name) + "/delete", "csrf": visit.session.csrfToken,
                ]
            },
        ]
        return html(
            layout(
                title: "Media files",
                scope: tenant.name,
                visit: visit,
                nav: nav(visit, current: "/t/\(tenant.id)/console/catalog"),
                body: render("media", values),
                notice: notice,
                error: error
            ),
            status
        )
    }

    /// A `multipart/form-data` upload: its CSRF field is read before the file, whose bytes go to the media folder
    /// as they arrive (the admin API's `PUT` rules: kind by name and content, size, quota).
    func uploadMedia(_ request: Request, _ context: BrokerRequestContext) async throws -> Response {
        let tenant = try await tenant(context)
        guard Self.sameOrigin(request) else { return forbidden("This form came from another site.") }
        guard let visit = try await visit(request, tenant: tenant) else {
            return redirect("/t/\(tenant.id)/console/sign-in")
        }
        guard let upload = MultipartUpload(contentType: request.headers[.contentType], body: request.body) else {
            return try await mediaPage(
                visit,
                error: "The upload is not a multipart/form-data form.",
                status: .unsupportedMediaType
            )
        }
        do {
            try await upload.readFields()
            guard ConsoleSessionPolicy.matches(upload.fields["csrf"], visit.session.csrfToken) else {
                context.logger.notice("console upload refused: no valid CSRF token")
                return forbidden("The form's security token is missing or stale; reload the page and try again.")
            }
            guard let file = upload.file, !file.filename.isEmpty else {
                throw EngineError(.invalidInput, "choose a file to upload")
            }
            let (saved, created) = try await administration.uploadMedia(
                tenant: tenant.id,
                name: file.filename,
                // The browser's guess of the type is not asked for: the name's extension and the first bytes decide.
                contentType: MediaKind(extensionOf: file.filename)?.contentType,
                parts: upload.fileParts,
                limits: MediaLimits(fileSize: configuration.maxUploadSize, tenantQuota: configuration.mediaQuota),
                to: try mediaFolder(),
                by: visit.actor
            )
            return try await mediaPage(
                visit,
                notice: "\(saved.name) is \(created ? "uploaded" : "replaced") (\(Self.bytes(saved.size))).",
                status: created ? .created : .ok
            )
        } catch let error as EngineError {
            context.logger.notice("console upload refused", metadata: ["error": "\(error.message)"])
            return try await mediaPage(visit, error: error.message, status: Problem(error).status)
        }
    }

    func deleteMedia(_ visit: Visit, name: String) async throws -> Response {
        let tenant = try requireTenant(visit)
        do {
            try await administration.deleteMedia(tenant: tenant.id, name: name, in: try mediaFolder(), by: visit.actor)
            return try await mediaPage(visit, notice: "\(name) is deleted.")
        } catch let error as EngineError {
            return try await mediaPage(visit, error: error.message, status: Problem(error).status)
        }
    }

    static func bytes(_ count: Int) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1 << 20 { return String(format: "%.1f KiB", Double(count) / 1024) }
        if count < 1 << 30 { return String(format: "%.1f MiB", Double(count) / 1_048_576) }
        return String(format: "%.1f GiB", Double(count) / 1_073_741_824)
    }
}
