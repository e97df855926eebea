/// The tenant's settings page and a user's page.
extension ConsoleTemplates {
    static let settingsTemplates = [("settings", settings), ("user", user)]

    static let settings = """
        <p class="muted">The programme's defaults: a user's own settings win over them, and a user's weekdays choose
        among the programme's days.</p>
        <form class="stack" method="post" action="{{action}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="settings-delivery">Delivery time</label>
        <input id="settings-delivery" name="deliveryTime" type="time" required value="{{deliveryTime}}">
        <fieldset><legend>Quiet hours (no pushes; leave both empty for none)</legend>
        <label for="settings-quiet-start">From</label>
        <input id="settings-quiet-start" name="quietStart" type="time" value="{{quietStart}}">
        <label for="settings-quiet-end">Until</label>
        <input id="settings-quiet-end" name="quietEnd" type="time" value="{{quietEnd}}">
        </fieldset>
        <fieldset><legend>The programme's days</legend>
        {{#weekdays}}<div><input id="{{id}}" name="{{field}}" type="checkbox"{{#checked}} checked{{/checked}}>
        <label class="check" for="{{id}}">{{name}}</label></div>{{/weekdays}}
        </fieldset>
        <label for="settings-zone">Time zone</label>
        <input id="settings-zone" name="timeZone" required value="{{timeZone}}">
        <label for="settings-language">Language</label>
        <input id="settings-language" name="language" required maxlength="8" value="{{language}}">
        <label for="settings-max">Pushes per user and day</label>
        <input id="settings-max" name="maxPushesPerDay" type="number" min="1" max="24" required value="{{maxPushesPerDay}}">
        <label for="settings-expiry">APNs and FCM keep a push for an offline phone</label>
        <select id="settings-expiry" name="pushExpiry">{{#pushExpiry}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/pushExpiry}}</select>
        <label for="settings-first">New users start</label>
        <select id="settings-first" name="firstDelivery">{{#firstDelivery}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/firstDelivery}}</select>
        <fieldset><legend>Learned delivery times</legend>
        <p class="muted">Each user's impulse moves, at most an hour a day, toward the half hour they read in, within the
        window around their delivery time; quiet hours and the programme's days still win. A time a user set themselves
        is kept unless they opt in. The holdout keeps fixed times, so that the report can show the effect. When the
        holdout shows learned times read within the hour significantly less often than fixed ones two weeks in a row,
        learning pauses by itself and everyone gets their stated time.</p>
        {{#learnedFallback}}<p id="settings-learned-fallback" class="error">Learned times are paused since {{since}}:
        {{reason}}.</p>
        <div><input id="settings-learned-resume" name="learnedResume" type="checkbox">
        <label class="check" for="settings-learned-resume">Turn learning back on (judged again from next Monday)</label></div>{{/learnedFallback}}
        <div><input id="settings-learned" name="learnedEnabled" type="checkbox"{{#learnedEnabled}} checked{{/learnedEnabled}}>
        <label class="check" for="settings-learned">Learn each user's delivery time</label></div>
        <label for="settings-learned-window">Window either way (minutes, 30-360)</label>
        <input id="settings-learned-window" name="learnedWindow" type="number" min="30" max="360" required value="{{learnedWindow}}">
        <label for="settings-learned-holdout">Holdout (% of users on fixed times, 0-50)</label>
        <input id="settings-learned-holdout" name="learnedHoldout" type="number" min="0" max="50" step="any" required value="{{learnedHoldout}}">
        </fieldset>
        <button type="submit">Save</button>
        </form>
        """

    static let user = """
        <p>{{state}}{{#admin}}, an admin of the tenant{{/admin}}; added {{created}}.
        <a href="{{exportHref}}">Export everything held of them</a></p>
        <h2>Settings</h2>
        <form class="stack" method="post" action="{{settingsAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">Empty fields keep the user's setting; without one, the tenant's ({{defaults}}) applies.</p>
        <label for="user-zone">Time zone</label><input id="user-zone" name="timeZone" value="{{timeZone}}">
        <label for="user-delivery">Delivery time</label>
        <input id="user-delivery" name="deliveryTime" type="time" value="{{deliveryTime}}">
        <fieldset><legend>Quiet hours</legend>
        <label for="user-quiet-start">From</label><input id="user-quiet-start" name="quietStart" type="time" value="{{quietStart}}">
        <label for="user-quiet-end">Until</label><input id="user-quiet-end" name="quietEnd" type="time" value="{{quietEnd}}">
        </fieldset>
        <label for="user-language">Language</label><input id="user-language" name="language" maxlength="8" value="{{language}}">
        <button type="submit">Save settings</button>
        </form>
        <h2>Learned delivery time</h2>
        <p id="learned-time">{{learnedSummary}}</p>
        {{#learnedOwnTime}}<form class="inline" method="post" action="{{learnedAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="optedIn" value="{{learnedToggleTo}}"><button class="secondary" type="submit">{{learnedToggleLabel}}</button></form>{{/learnedOwnTime}}
        <h2>Devices</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Token</th><th scope="col">Name</th><th scope="col">Environment</th>
        <th scope="col">Registered</th></tr></thead>
        <tbody>{{#devices}}<tr><td>{{token}}</td><td>{{name}}</td><td>{{environment}}</td><td>{{registered}}</td></tr>{{/devices}}
        {{^devices}}<tr><td colspan="4" class="muted">No devices: pushes wait until the app registers one.</td></tr>{{/devices}}</tbody>
        </table></div>
        <h2>Deliveries</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Impulse</th><th scope="col">Kind</th><th scope="col">Day</th>
        <th scope="col">Assigned</th><th scope="col">State</th></tr></thead>
        <tbody>{{#deliveries}}<tr><td>{{title}} ({{impulse}})</td><td>{{kind}}</td><td>{{day}}</td><td>{{assigned}}</td>
        <td>{{state}}</td></tr>{{/deliveries}}
        {{^deliveries}}<tr><td colspan="5" class="muted">Nothing delivered yet.</td></tr>{{/deliveries}}</tbody>
        </table></div>
        <h2>Reminders</h2>
        <ul>{{#reminders}}<li>{{impulse}} at {{at}}</li>{{/reminders}}{{^reminders}}<li class="muted">None pending.</li>{{/reminders}}</ul>
        <h2>Deliver an impulse now</h2>
        <form class="row" method="post" action="{{deliverAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <div><label for="user-impulse">Impulse</label><select id="user-impulse" name="impulse">
        {{#impulses}}<option value="{{id}}">{{title}} ({{id}})</option>{{/impulses}}</select></div>
        <button type="submit">Deliver now</button>
        </form>
        <h2>Password</h2>
        <form class="row" method="post" action="{{passwordAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <div><label for="user-password">New password</label>
        <input id="user-password" name="password" type="password" required autocomplete="new-password"></div>
        <button type="submit">Replace the password</button>
        </form>
        <h2>Access</h2>
        <form class="inline" method="post" action="{{enableAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="enabled" value="{{toggleTo}}"><button class="secondary" type="submit">{{toggleLabel}}</button></form>
        <form class="inline" method="post" action="{{deleteAction}}" data-confirm="Delete {{username}} and everything of theirs?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="danger" type="submit">Delete</button></form>
        """
}
