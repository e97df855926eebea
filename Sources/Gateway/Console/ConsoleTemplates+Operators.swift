/// The operators' pages: tenants and this node.
extension ConsoleTemplates {
    static let operatorTemplates = [("tenants", tenants), ("node", node)]

    static let tenants = """
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Tenant</th><th scope="col">Name</th><th scope="col">State</th><th scope="col">Time zone</th>
        <th scope="col">App (topic)</th><th scope="col">Push credentials (APNs, FCM) by</th><th scope="col">Actions</th></tr></thead>
        <tbody>{{#tenants}}<tr><td><a href="{{href}}">{{id}}</a></td><td>{{name}}</td><td>{{state}}</td><td>{{zone}}</td>
        <td>{{topic}}</td><td>{{credentials}} (<a href="{{apnsHref}}">devices and push</a>)</td>
        <td><form class="inline" method="post" action="{{suspendAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="suspended" value="{{suspendTo}}"><button class="secondary" type="submit">{{suspendLabel}}</button></form>
        <form class="inline" method="post" action="{{credentialsAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="allowed" value="{{credentialsTo}}"><button class="secondary" type="submit">{{credentialsLabel}}</button></form>
        <form class="inline" method="post" action="{{deleteAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <label class="check" for="{{confirmID}}">Type {{id}} to delete</label>
        <input id="{{confirmID}}" name="confirm" size="10" autocomplete="off">
        <button class="danger" type="submit">Delete</button></form></td></tr>{{/tenants}}
        {{^tenants}}<tr><td colspan="7" class="muted">No tenants yet.</td></tr>{{/tenants}}</tbody>
        </table></div>
        <h2>Create a tenant</h2>
        <form class="stack" method="post" action="{{createAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="tenant-id">Id (lower-case letters, digits and dashes; in its addresses)</label>
        <input id="tenant-id" name="id" required maxlength="64" value="{{id}}">
        <label for="tenant-name">Name</label><input id="tenant-name" name="name" value="{{name}}">
        <label for="tenant-zone">Time zone</label>
        <input id="tenant-zone" name="timeZone" placeholder="Europe/Berlin" value="{{timeZone}}">
        <label for="tenant-topic">App (APNs topic, the bundle id)</label>
        <input id="tenant-topic" name="apnsTopic" placeholder="com.example.impulse" value="{{topic}}">
        <label for="tenant-environment">APNs environment of tokens registered without one</label>
        <select id="tenant-environment" name="apnsEnvironment"><option value="production">production</option>
        <option value="sandbox"{{#sandbox}} selected{{/sandbox}}>sandbox</option></select>
        <label for="admin-username">First programme administrator (optional)</label>
        <input id="admin-username" name="adminUsername" autocomplete="off" value="{{admin}}">
        <label for="admin-password">Their password</label>
        <input id="admin-password" name="adminPassword" type="password" autocomplete="new-password">
        <button type="submit">Create</button>
        </form>
        """

    static let node = """
        <p class="muted">What this node's <code>/inspect</code> shows; the page refreshes every 10 seconds.</p>
        <div class="cards">
        {{#facts}}<div class="card"><span class="value small">{{value}}</span><span class="label">{{label}}</span></div>{{/facts}}
        </div>
        {{#database}}<h2>Shared database</h2>
        <p>{{url}}: {{claims}} scheduler claims, {{leases}} push leases held; connections {{pool}}.</p>{{/database}}
        {{#scheduler}}<h2>Scheduler</h2>
        {{#failing}}<p class="error" role="alert">The dispatch is failing: {{failing}}</p>{{/failing}}
        <p>Next due: {{next}}. Lag: {{lag}}.</p>
        <div class="table-wrap"><table><thead><tr><th scope="col">Since start</th><th class="num" scope="col">Count</th></tr></thead>
        <tbody>{{#statistics}}<tr><td>{{label}}</td><td class="num">{{value}}</td></tr>{{/statistics}}</tbody></table></div>
        {{/scheduler}}
        <h2>Tenants on this node</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Tenant</th><th class="num" scope="col">Queued pushes</th><th class="num" scope="col">APNs connections</th>
        <th scope="col">Paused</th><th scope="col">APNs unreachable</th></tr></thead>
        <tbody>{{#tenants}}<tr><td>{{tenant}}</td><td class="num">{{queued}}</td><td class="num">{{connections}}</td>
        <td>{{paused}}</td><td>{{unreachable}}</td></tr>{{/tenants}}</tbody>
        </table></div>
        """
}
