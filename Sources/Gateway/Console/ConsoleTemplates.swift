import Mustache

/// The console's pages as Mustache templates: `{{value}}` is HTML-escaped, and only the layout's `{{{body}}}` and a
/// report's `{{{chart}}}` (markup the broker rendered itself from escaped parts) are not.
enum ConsoleTemplates {
    static func library() throws -> MustacheLibrary {
        var library = MustacheLibrary()
        for (name, text) in pages + catalogTemplates + devicesTemplates + webhooksTemplates + settingsTemplates
            + operatorTemplates
        {
            try library.register(text, named: name)
        }
        return library
    }

    static let pages = [
        ("layout", layout), ("sign-in", signIn), ("dashboard", dashboard), ("report", report), ("users", users),
        ("import", importReport), ("audit", audit),
        ("message", message),
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        {{#refresh}}<meta http-equiv="refresh" content="{{refresh}}">{{/refresh}}
        <title>{{title}} · Impulse Broker</title>
        <link rel="stylesheet" href="/console/assets/console.css">
        <script src="/console/assets/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#content">Skip to content</a>
        <header class="top">
        <div><strong>Impulse Broker</strong>{{#scope}} · {{scope}}{{/scope}}</div>
        {{#signedIn}}<div class="who">Signed in as {{name}} ({{role}})
        <form class="inline" method="post" action="{{signOut}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <button class="secondary" type="submit">Sign out</button></form>
        <form class="inline" method="post" action="{{signOutEverywhere}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <button class="secondary" type="submit">Sign out everywhere</button></form></div>{{/signedIn}}
        </header>
        {{#hasNav}}<nav class="main" aria-label="Console sections"><ul>
        {{#nav}}<li><a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a></li>{{/nav}}
        </ul></nav>{{/hasNav}}
        <main id="content">
        <h1>{{title}}</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{{body}}}
        </main>
        </body>
        </html>
        """

    static let signIn = """
        <form class="stack signin" method="post" action="{{action}}">
        <p class="muted">{{hint}}</p>
        <label for="name">{{nameLabel}}</label>
        <input id="name" name="name" autocomplete="username" required maxlength="128">
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
        <button type="submit">Sign in</button>
        </form>
        """

    static let counts = """
        <div class="cards">
        {{#cards}}<div class="card"><span class="value">{{value}}</span><span class="label">{{label}}</span></div>{{/cards}}
        </div>
        """

    static let dashboard = """
        <p class="muted">Today is {{today}} in the programme's time zone ({{zone}}). This page refreshes every 30 seconds;
        updated {{updated}}.</p>
        <h2>Today's dispatch</h2>
        {{#alerts}}<p class="error" role="alert">{{.}}</p>{{/alerts}}
        <div class="progress">
        <p>Users due so far today: {{due}}. Deliveries assigned: {{assigned}} (manual ones and reminders included).</p>
        <label for="progress-pushed">Settled: {{settled}} of {{assigned}} assigned ({{pushed}} pushed, {{noDevice}} without a
        device, {{failed}} failed){{#queued}}; {{queued}} waiting in the push queue{{/queued}}</label>
        <progress id="progress-pushed" max="{{pushedMax}}" value="{{settled}}">{{settled}} of {{assigned}}</progress>
        </div>
        \(counts)
        <h2>The last 30 days</h2>
        <p class="legend" aria-hidden="true"><span class="assigned"></span>assigned<span class="read"></span>read</p>
        {{{chart}}}
        <p><a href="{{reportHref}}">The engagement report</a> has the figures per day, impulse and life area.</p>
        """

    static let report = """
        <form class="row" method="get" action="{{action}}">
        <div><label for="from">From</label><input id="from" name="from" type="date" value="{{from}}"></div>
        <div><label for="to">To</label><input id="to" name="to" type="date" value="{{to}}"></div>
        <button type="submit">Show</button>
        </form>
        <p>CSV: {{#csv}}<a href="{{href}}">{{label}}</a> {{/csv}}</p>
        \(counts)
        <p class="legend" aria-hidden="true"><span class="assigned"></span>assigned<span class="read"></span>read</p>
        {{{chart}}}
        <h2>Per day</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Day</th><th class="num" scope="col">Active</th><th class="num" scope="col">Due</th>
        <th class="num" scope="col">Assigned</th><th class="num" scope="col">Pushed</th><th class="num" scope="col">No device</th>
        <th class="num" scope="col">Failed</th><th class="num" scope="col">Read</th><th class="num" scope="col">Read rate</th>
        <th class="num" scope="col">Median to read</th></tr></thead>
        <tbody>{{#days}}<tr><th scope="row">{{day}}</th><td class="num">{{active}}</td><td class="num">{{due}}</td>
        <td class="num">{{assigned}}</td><td class="num">{{pushed}}</td><td class="num">{{noDevice}}</td>
        <td class="num">{{failed}}</td><td class="num">{{read}}</td><td class="num">{{readRate}}</td>
        <td class="num">{{median}}</td></tr>{{/days}}</tbody>
        </table></div>
        <h2>Per channel</h2>
        <p class="muted">Deliveries a channel accepted a push of, and how many of them were read; a user with an iPhone
        and an Android phone counts on both.</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Channel</th><th class="num" scope="col">Pushed</th><th class="num" scope="col">Read</th>
        <th class="num" scope="col">Read rate</th></tr></thead>
        <tbody>{{#channels}}<tr><th scope="row">{{channel}}</th><td class="num">{{pushed}}</td><td class="num">{{read}}</td>
        <td class="num">{{readRate}}</td></tr>{{/channels}}</tbody>
        </table></div>
        {{#hasTiming}}<h2>Learned delivery times against the holdout</h2>
        <p id="learned-timing-summary">{{timingSummary}}</p>
        <p class="muted">The goal is an impulse read soon after its push: the headline is the share read within the
        hour. The holdout keeps the times people set; both arms hold only people whose time may be learned. A
        difference is learned minus holdout, in percentage points, with a 95% interval that counts people, not
        pushes (one person's days are alike); an interval that leaves out 0 is a real difference.</p>
        <div class="table-wrap"><table id="learned-timing">
        <thead><tr><th scope="col">Week of</th><th scope="col">Arm</th><th class="num" scope="col">People</th>
        <th class="num" scope="col">Deliveries</th><th class="num" scope="col">Read within the hour</th>
        <th class="num" scope="col">Read at all</th><th class="num" scope="col">Median to read</th>
        <th class="num" scope="col">Difference within the hour</th><th class="num" scope="col">Difference read at all</th></tr></thead>
        <tbody>{{#timing}}<tr><th scope="row" rowspan="2">{{week}}</th><td>learned</td><td class="num">{{learnedUsers}}</td>
        <td class="num">{{learnedDeliveries}}</td><td class="num">{{learnedWithinHour}}</td><td class="num">{{learnedRead}}</td>
        <td class="num">{{learnedMedian}}</td><td class="num" rowspan="2">{{withinHourDifference}}</td>
        <td class="num" rowspan="2">{{readDifference}}</td></tr>
        <tr><td>holdout</td><td class="num">{{holdoutUsers}}</td><td class="num">{{holdoutDeliveries}}</td>
        <td class="num">{{holdoutWithinHour}}</td><td class="num">{{holdoutRead}}</td><td class="num">{{holdoutMedian}}</td></tr>{{/timing}}</tbody>
        </table></div>{{/hasTiming}}
        <h2>Per impulse</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Impulse</th><th scope="col">Title</th><th scope="col">Life area</th>
        <th class="num" scope="col">Assigned</th><th class="num" scope="col">Pushed</th><th class="num" scope="col">Read</th>
        <th class="num" scope="col">Read rate</th></tr></thead>
        <tbody>{{#impulses}}<tr><td>{{id}}</td><td>{{title}}</td><td>{{area}}</td><td class="num">{{assigned}}</td>
        <td class="num">{{pushed}}</td><td class="num">{{read}}</td><td class="num">{{readRate}}</td></tr>{{/impulses}}
        {{^impulses}}<tr><td colspan="7" class="muted">Nothing was delivered in this range.</td></tr>{{/impulses}}</tbody>
        </table></div>
        <h2>Per life area</h2>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Life area</th><th class="num" scope="col">Assigned</th><th class="num" scope="col">Read</th>
        <th class="num" scope="col">Read rate</th></tr></thead>
        <tbody>{{#areas}}<tr><td>{{area}}</td><td class="num">{{assigned}}</td><td class="num">{{read}}</td>
        <td class="num">{{readRate}}</td></tr>{{/areas}}</tbody>
        </table></div>
        """

    static let users = """
        <form class="row" method="get" action="{{action}}" role="search">
        <div><label for="search">Search usernames</label><input id="search" name="search" value="{{search}}"></div>
        <button type="submit">Search</button>
        </form>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Username</th><th scope="col">State</th><th scope="col">Admin</th>
        <th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
        <tbody>{{#users}}<tr><td><a href="{{pageHref}}">{{username}}</a></td><td>{{state}}</td><td>{{admin}}</td><td>{{created}}</td>
        <td><form class="inline" method="post" action="{{enableAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="enabled" value="{{toggleTo}}"><button class="secondary" type="submit">{{toggleLabel}}</button></form>
        <form class="inline" method="post" action="{{deleteAction}}" data-confirm="Delete {{username}} and everything of theirs?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="danger" type="submit">Delete</button></form>
        <a href="{{exportHref}}">Export</a></td></tr>{{/users}}
        {{^users}}<tr><td colspan="5" class="muted">No users match.</td></tr>{{/users}}</tbody>
        </table></div>
        {{#next}}<p><a href="{{next}}">More users</a></p>{{/next}}
        <h2>Add a user</h2>
        <form class="stack" method="post" action="{{createAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="new-username">Username</label><input id="new-username" name="username" required maxlength="128">
        <label for="new-password">Password</label>
        <input id="new-password" name="password" type="password" required autocomplete="new-password">
        <label for="new-zone">Time zone (optional)</label><input id="new-zone" name="timeZone" placeholder="Europe/Berlin">
        <button type="submit">Add</button>
        </form>
        <h2>Import users from CSV</h2>
        <form class="stack" method="post" action="{{importAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <p class="muted">A header naming the columns (username, password, timeZone, deliveryTime, enabled, admin, ...),
        then a row per user. Known usernames are updated.</p>
        <label for="csv-file">CSV file</label><input id="csv-file" type="file" accept=".csv,text/csv" data-into="csv">
        <label for="csv">or the CSV text</label><textarea id="csv" name="csv" required></textarea>
        <label for="mode">Mode</label><select id="mode" name="mode"><option value="per-row">each valid row</option>
        <option value="all-or-nothing">all rows or none</option></select>
        <button type="submit">Import</button>
        </form>
        """

    static let importReport = """
        <p>{{summary}}</p>
        <div class="table-wrap"><table>
        <thead><tr><th class="num" scope="col">Line</th><th scope="col">Username</th><th scope="col">Result</th>
        <th scope="col">Reason</th></tr></thead>
        <tbody>{{#rows}}<tr><td class="num">{{line}}</td><td>{{username}}</td><td>{{result}}</td><td>{{reason}}</td></tr>{{/rows}}</tbody>
        </table></div>
        <p><a href="{{back}}">Back to the users</a></p>
        """

    static let audit = """
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th></tr></thead>
        <tbody>{{#entries}}<tr><td>{{at}}</td><td>{{actor}} ({{role}})</td><td>{{action}}</td><td>{{target}}</td></tr>{{/entries}}
        {{^entries}}<tr><td colspan="4" class="muted">Nothing yet.</td></tr>{{/entries}}</tbody>
        </table></div>
        {{#next}}<p><a href="{{next}}">Older entries</a></p>{{/next}}
        """

    static let message = """
        <p>{{text}}</p>
        {{#link}}<p><a href="{{link}}">{{linkLabel}}</a></p>{{/link}}
        """
}
