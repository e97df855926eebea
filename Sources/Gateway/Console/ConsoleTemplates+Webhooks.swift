/// The webhooks page.
extension ConsoleTemplates {
    static let webhooksTemplates = [("webhooks", webhooks)]

    static let webhooks = """
        <p class="muted">Each event is sent to the endpoints that take it, signed (README, "Webhooks"), retried for a
        day while the endpoint fails.</p>
        <div class="table-wrap"><table>
        <thead><tr><th scope="col">Endpoint</th><th scope="col">Events</th><th scope="col">State</th>
        <th class="num" scope="col">Waiting</th><th class="num" scope="col">Delivered</th><th class="num" scope="col">Dropped</th>
        <th scope="col">Last attempt</th><th scope="col">Actions</th></tr></thead>
        <tbody>{{#endpoints}}<tr><td>{{url}}</td><td>{{events}}</td><td>{{state}}</td><td class="num">{{pending}}</td>
        <td class="num">{{delivered}}</td><td class="num">{{dropped}}</td><td>{{last}}</td>
        <td><form class="inline" method="post" action="{{enabledAction}}"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="enabled" value="{{toggleTo}}"><button class="secondary" type="submit">{{toggleLabel}}</button></form>
        <form class="inline" method="post" action="{{secretAction}}" data-confirm="Make a new signing secret for {{url}}?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="secondary" type="submit">New secret</button></form>
        <form class="inline" method="post" action="{{deleteAction}}" data-confirm="Delete the webhook to {{url}}?">
        <input type="hidden" name="csrf" value="{{csrf}}"><button class="danger" type="submit">Delete</button></form></td></tr>
        {{#attempts}}<tr><td colspan="8" class="muted">{{at}}: {{event}} {{outcome}} {{detail}}</td></tr>{{/attempts}}{{/endpoints}}
        {{^endpoints}}<tr><td colspan="8" class="muted">No endpoints.</td></tr>{{/endpoints}}</tbody>
        </table></div>
        <h2>Register an endpoint</h2>
        <form class="stack" method="post" action="{{createAction}}">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="webhook-url">HTTPS address</label>
        <input id="webhook-url" name="url" type="url" required placeholder="https://hooks.example.com/impulse" value="{{url}}">
        <fieldset><legend>Events</legend>
        {{#events}}<div><input id="{{id}}" name="{{field}}" type="checkbox"{{#checked}} checked{{/checked}}>
        <label class="check" for="{{id}}">{{name}}</label></div>{{/events}}
        </fieldset>
        <button type="submit">Register</button>
        </form>
        """
}
