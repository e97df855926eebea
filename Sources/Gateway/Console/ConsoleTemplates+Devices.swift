/// The devices page: iPhones (APNs) and Android phones (FCM).
extension ConsoleTemplates {
    static let devicesTemplates = [("devices", devices)]

    static let devices = """
        <h2>Devices</h2>
        <p class="muted">The programme's app is <code>{{topic}}</code>. Quarantined tokens get no pushes until their app
        registers them again; removed ones (APNs or FCM said the app is gone) are deleted by the next purge.</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Platform</th><th scope="col">App (topic)</th><th scope="col">Environment</th>
        <th class="num" scope="col">Registered</th><th class="num" scope="col">Quarantined</th><th class="num" scope="col">Removed</th></tr></thead>
        <tbody>{{#devices}}<tr><td>{{platform}}</td><td>{{topic}}</td><td>{{environment}}</td><td class="num">{{active}}</td>
        <td class="num">{{quarantined}}</td><td class="num">{{removed}}</td></tr>{{/devices}}
        {{^devices}}<tr><td colspan="6" class="muted">No devices registered yet.</td></tr>{{/devices}}</tbody>
        </table></div>
        <h2>APNs on this node</h2>
        {{#paused}}<p class="error" role="alert">Pushes are paused: {{paused}}</p>{{/paused}}
        <p>{{queued}} pushes wait in this programme's queue.</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Credential</th><th scope="col">Environment</th><th class="num" scope="col">Open</th>
        <th class="num" scope="col">Draining</th><th scope="col">Streams in use</th><th scope="col">Token age</th>
        <th class="num" scope="col">Connections opened</th><th class="num" scope="col">Closed by APNs</th></tr></thead>
        <tbody>{{#pools}}<tr><td>{{identity}}</td><td>{{environment}}</td><td class="num">{{open}}</td>
        <td class="num">{{draining}}</td><td>{{streams}}</td><td>{{jwt}}</td><td class="num">{{opened}}</td>
        <td class="num">{{goAways}}</td></tr>
        {{#unreachable}}<tr><td colspan="8"><span class="bad">APNs {{unreachable}}</span></td></tr>{{/unreachable}}{{/pools}}
        {{^pools}}<tr><td colspan="8" class="muted">No connection yet: one opens with the first push.</td></tr>{{/pools}}</tbody>
        </table></div>
        <h2>APNs credentials</h2>
        {{#managesCredentials}}
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Kind</th><th scope="col">Identity</th><th scope="col">Apps</th><th scope="col">Expires</th>
        <th scope="col">State</th><th scope="col">Fingerprint</th><th scope="col">Uploaded</th><th scope="col">In use since</th>
        <th scope="col">Action</th></tr></thead>
        <tbody>{{#credentials}}<tr><td>{{kind}}</td><td>{{identity}}</td><td>{{topics}}</td><td>{{expires}}</td>
        <td>{{state}}</td><td><code>{{fingerprint}}</code></td><td>{{created}}</td><td>{{activated}}</td>
        <td><form class="inline" method="post" action="{{deleteAction}}" data-confirm="Delete this credential?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="danger" type="submit">Delete</button></form></td></tr>{{/credentials}}
        {{^credentials}}<tr><td colspan="9" class="muted">None uploaded: pushes use the broker's default credential.</td></tr>{{/credentials}}</tbody>
        </table></div>
        <h3>Upload a signing key</h3>
        <form class="stack" method="post" action="{{uploadAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">The <code>.p8</code> key from Apple's developer account, with its team and key ids. It is checked,
        sealed, and used once APNs accepts a push made with it. Certificates (PKCS#12) go over the admin API
        (README, "APNs credentials").</p>
        <label for="teamID">Team id</label><input id="teamID" name="teamID" required maxlength="10" autocomplete="off">
        <label for="keyID">Key id</label><input id="keyID" name="keyID" required maxlength="10" autocomplete="off">
        <label for="key-file">Key file (.p8)</label><input id="key-file" type="file" accept=".p8" data-into="privateKey">
        <label for="privateKey">or the key's text</label>
        <textarea id="privateKey" name="privateKey" required autocomplete="off" spellcheck="false"></textarea>
        <button type="submit">Upload</button>
        </form>
        {{/managesCredentials}}
        {{^managesCredentials}}<p class="muted">An operator manages this programme's APNs credentials.</p>{{/managesCredentials}}
        <h2>FCM on this node</h2>
        {{#fcm}}<div class="table-wrap"><table>
        <thead><tr><th scope="col">Service account</th><th scope="col">Firebase project</th><th class="num" scope="col">Open</th>
        <th scope="col">Streams in use</th><th scope="col">Credential</th><th class="num" scope="col">Access tokens fetched</th>
        <th class="num" scope="col">Connections opened</th></tr></thead>
        <tbody><tr><td>{{identity}}</td><td>{{project}}</td><td class="num">{{open}}</td><td>{{streams}}</td>
        <td>{{credential}}</td><td class="num">{{tokens}}</td><td class="num">{{opened}}</td></tr>
        {{#paused}}<tr><td colspan="7"><span class="bad">FCM asked for a pause: {{paused}} left</span></td></tr>{{/paused}}
        {{#unreachable}}<tr><td colspan="7"><span class="bad">FCM {{unreachable}}</span></td></tr>{{/unreachable}}</tbody>
        </table></div>{{/fcm}}
        {{^fcm}}<p class="muted">No FCM service account: Android phones get no pushes (README, "Android phones").</p>{{/fcm}}
        <h2>FCM service accounts</h2>
        {{#managesCredentials}}
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Firebase project</th><th scope="col">Account</th><th scope="col">State</th>
        <th scope="col">Fingerprint</th><th scope="col">Uploaded</th><th scope="col">In use since</th><th scope="col">Action</th></tr></thead>
        <tbody>{{#fcmCredentials}}<tr><td>{{project}}</td><td>{{account}}</td><td>{{state}}</td><td><code>{{fingerprint}}</code></td>
        <td>{{created}}</td><td>{{activated}}</td>
        <td><form class="inline" method="post" action="{{deleteAction}}" data-confirm="Delete this service account?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="danger" type="submit">Delete</button></form></td></tr>{{/fcmCredentials}}
        {{^fcmCredentials}}<tr><td colspan="7" class="muted">None uploaded: Android pushes use the broker's configured account.</td></tr>{{/fcmCredentials}}</tbody>
        </table></div>
        <h3>Upload a service account</h3>
        <form class="stack" method="post" action="{{fcmUploadAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">The JSON key of a service account of the Android app's Firebase project (Firebase console,
        Project settings, Service accounts). It is checked, sealed, and used once FCM accepts a push made with it.</p>
        <label for="service-account-file">Key file (.json)</label>
        <input id="service-account-file" type="file" accept=".json,application/json" data-into="serviceAccount">
        <label for="serviceAccount">or the key's text</label>
        <textarea id="serviceAccount" name="serviceAccount" required autocomplete="off" spellcheck="false"></textarea>
        <button type="submit">Upload</button>
        </form>
        {{/managesCredentials}}
        {{^managesCredentials}}<p class="muted">An operator manages this programme's FCM service accounts.</p>{{/managesCredentials}}
        """
}
