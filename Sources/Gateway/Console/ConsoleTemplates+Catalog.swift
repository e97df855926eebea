/// The catalog's and the media folder's pages.
extension ConsoleTemplates {
    static let catalogTemplates = [
        ("catalog", catalog), ("impulse", impulse), ("media", media),
    ]

    static let catalog = """
        <p><a href="{{newHref}}">Add an impulse</a> · <a href="{{mediaHref}}">Media files</a></p>
        <p class="muted">A retired impulse is never chosen again; deliveries keep showing it.</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Impulse</th><th scope="col">Language</th><th scope="col">Title</th>
        <th scope="col">Life area</th><th scope="col">Series</th><th scope="col">State</th><th scope="col">Actions</th></tr></thead>
        <tbody>{{#impulses}}<tr><td>{{id}}</td><td>{{language}}</td><td>{{title}}</td><td>{{area}}</td><td>{{series}}</td>
        <td>{{state}}</td><td><a href="{{editHref}}" aria-label="Edit {{id}}">Edit</a>
        <form class="inline" method="post" action="{{action}}">
        <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="retired" value="{{retireTo}}">
        <button class="secondary" type="submit">{{label}}</button></form></td></tr>{{/impulses}}
        {{^impulses}}<tr><td colspan="7" class="muted">The catalog is empty.</td></tr>{{/impulses}}</tbody>
        </table></div>
        <h2>Import a catalog</h2>
        <form class="stack" method="post" action="{{importAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">A JSON document <code>{"items": [...]}</code> in the catalog format (README, "The catalog"):
        impulses with a known workingID are replaced, the others added; one bad item refuses the whole document.</p>
        <label for="catalog-file">Catalog file</label>
        <input id="catalog-file" type="file" accept=".json,application/json" data-into="document">
        <label for="document">or the JSON text</label><textarea id="document" name="document" required></textarea>
        <button type="submit">Import</button>
        </form>
        """

    static let impulse = """
        <form class="stack wide" method="post" action="{{action}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        {{#isNew}}<label for="workingID">Impulse id</label>
        <input id="workingID" name="workingID" required maxlength="128" value="{{workingID}}">{{/isNew}}
        {{^isNew}}<p>Impulse <strong>{{workingID}}</strong>{{#retired}} (retired){{/retired}}</p>{{/isNew}}
        <label for="language">Language</label><input id="language" name="language" required value="{{language}}">
        <label for="title">Title</label><input id="title" name="title" required value="{{title}}">
        <label for="descriptionShort">Short description</label>
        <input id="descriptionShort" name="descriptionShort" value="{{descriptionShort}}">
        <label for="description">Description</label>
        <textarea id="description" name="description">{{description}}</textarea>
        <label for="duration">Duration (minutes)</label>
        <input id="duration" name="duration" type="number" min="0" required value="{{duration}}">
        <label for="action">Action</label><select id="action" name="action">
        {{#actions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/actions}}</select>
        <label for="lifeArea">Life area</label><select id="lifeArea" name="lifeArea">
        {{#areas}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/areas}}</select>
        <div><input id="single" name="single" type="checkbox" value="true"{{#single}} checked{{/single}}>
        <label class="check" for="single">A single impulse (not part of a series)</label></div>
        <label for="series">Series (when not single)</label><input id="series" name="series" value="{{series}}">
        <label for="seriesPosition">Position in the series</label>
        <input id="seriesPosition" name="seriesPosition" type="number" min="1" value="{{seriesPosition}}">
        <label for="imageURLs">Image URLs, one per line (<code>/media/…</code> links must name a file of the media folder)</label>
        <textarea id="imageURLs" name="imageURLs">{{imageURLs}}</textarea>
        <label for="videoURL">Video URL</label><input id="videoURL" name="videoURL" value="{{videoURL}}">
        <label for="webURL">Web URL</label><input id="webURL" name="webURL" value="{{webURL}}">
        <button type="submit">Save</button>
        </form>
        <p><a href="{{back}}">Back to the catalog</a></p>
        """

    static let media = """
        <p class="muted">Files here are served at their path to the app; an impulse links them as
        <code>/media/{{tenant}}/name</code>. {{quota}}</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">File</th><th scope="col">Type</th><th class="num" scope="col">Size</th>
        <th scope="col">Changed</th><th scope="col">Action</th></tr></thead>
        <tbody>{{#files}}<tr><td><a href="{{path}}">{{name}}</a></td><td>{{type}}</td><td class="num">{{size}}</td>
        <td>{{modified}}</td><td><form class="inline" method="post" action="{{deleteAction}}"
        data-confirm="Delete {{name}}?"><input type="hidden" name="csrf" value="{{csrf}}">
        <button class="danger" type="submit">Delete</button></form></td></tr>{{/files}}
        {{^files}}<tr><td colspan="5" class="muted">No files yet.</td></tr>{{/files}}</tbody>
        </table></div>
        <h2>Upload a file</h2>
        <form class="stack" method="post" action="{{uploadAction}}" enctype="multipart/form-data">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">Accepted: {{kinds}}. The name says the kind, and the content must be of it; a file of
        the same name is replaced.</p>
        <label for="file">File</label><input id="file" name="file" type="file" required>
        <button type="submit">Upload</button>
        </form>
        """
}
