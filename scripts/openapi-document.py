#!/usr/bin/env python3
# Writes the OpenAPI 3.1 document of the HTTP surface to stdout:
#   python3 scripts/openapi-document.py > Sources/Gateway/REST/openapi.json
# OpenAPIContractTests fail when the document and the routes differ.
import json, copy

def ref(name): return {"$ref": f"#/components/schemas/{name}"}
def nullable(t): return {"type": [t, "null"]}
# Every list's `next`: one shape (a relative URL to follow as it is), null on the last page.
NEXT = {"type": ["string", "null"], "description": "the next page: a relative URL (the list's path and the next page's query) to request as it is; null on the last page"}
S = {}
S["Problem"] = {"type": "object", "description": "An RFC 9457 problem; `type` is `urn:impulse-broker:problem:<code>`.",
  "required": ["type", "title", "status", "detail"],
  "properties": {"type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer", "minimum": 400, "maximum": 599},
                 "detail": {"type": "string"}, "instance": {"type": "string"}}}
S["Impulse"] = {"type": "object", "description": "An impulse in the first system's format: exactly these members.",
  "additionalProperties": False,
  "required": ["single", "soundURL", "imageURLs", "timestamp", "duration", "title", "description", "webURL", "action",
               "language", "descriptionShort", "workingID", "videoURL"],
  "properties": {"single": {"type": "boolean"}, "soundURL": {"type": "null"},
    "imageURLs": {"type": "array", "items": {"type": "string"}}, "timestamp": {"type": "integer", "description": "Unix seconds of the assignment"},
    "duration": {"type": "integer", "description": "minutes"}, "title": {"type": "string"}, "description": {"type": "string"},
    "webURL": nullable("string"), "action": {"type": "string"}, "language": {"type": "string"},
    "descriptionShort": {"type": "string"}, "workingID": {"type": "string"}, "videoURL": nullable("string")}}
S["ImpulseList"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("Impulse")}}}
S["Delivery"] = {"type": "object", "additionalProperties": False,
  "required": ["sequence", "kind", "assignedAt", "pushedAt", "channels", "fetchedAt", "readAt", "read", "impulse", "lifeArea", "series", "seriesPosition"],
  "properties": {"sequence": {"type": "integer"}, "kind": {"type": "string", "enum": ["scheduled", "manual", "reminder"]},
    "assignedAt": {"type": "integer"}, "pushedAt": nullable("integer"),
    "channels": {"type": "array", "items": {"type": "string", "enum": ["apns", "fcm"]}, "description": "the channels that accepted its push (an iPhone's, an Android phone's)"},
    "fetchedAt": nullable("integer"), "readAt": nullable("integer"), "read": {"type": "boolean"},
    "impulse": ref("Impulse"), "lifeArea": {"type": "string"}, "series": nullable("string"), "seriesPosition": nullable("integer")}}
S["DeliveryPage"] = {"type": "object", "additionalProperties": False, "required": ["items", "unreadCount", "next"],
  "properties": {"items": {"type": "array", "items": ref("Delivery")}, "unreadCount": {"type": "integer", "minimum": 0},
                 "next": NEXT}}
S["ReminderRequest"] = {"type": "object", "description": "`remindAt` (RFC 3339) or `time` (`HH:mm`, its next occurrence in the user's zone).",
  "properties": {"remindAt": {"type": "string"}, "time": {"type": "string"}}}
S["Reminder"] = {"type": "object", "additionalProperties": False, "required": ["id", "workingID", "remindAt"],
  "properties": {"id": {"type": "integer"}, "workingID": {"type": "string"}, "remindAt": {"type": "string", "format": "date-time"}}}
S["ReminderList"] = {"type": "object", "additionalProperties": False, "required": ["reminders"],
  "properties": {"reminders": {"type": "array", "items": ref("Reminder")}}}
S["LocalTime"] = {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$", "description": "a local time of day, HH:mm"}
S["QuietHours"] = {"type": "object", "additionalProperties": False, "required": ["start", "end"],
  "properties": {"start": ref("LocalTime"), "end": ref("LocalTime")}}
S["Weekdays"] = {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 7}, "description": "ISO weekdays, 1 = Monday"}
S["LifeAreas"] = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100},
  "description": "screening scores by life area (work, health, ...)"}
S["Profile"] = {"type": "object", "additionalProperties": False,
  "required": ["username", "tenant", "language", "unreadCount", "lifeAreas", "preferences"],
  "properties": {"username": {"type": "string"}, "tenant": {"type": "string"}, "language": {"type": "string"},
    "unreadCount": {"type": "integer"}, "lifeAreas": ref("LifeAreas"),
    "preferences": {"type": "object", "additionalProperties": False, "required": ["timeZone", "deliveryTime", "weekdays", "maxPushesPerDay"],
      "properties": {"timeZone": {"type": "string"}, "deliveryTime": ref("LocalTime"), "quietHours": ref("QuietHours"),
                     "weekdays": ref("Weekdays"), "maxPushesPerDay": {"type": "integer"}}}}}
S["Preferences"] = {"type": "object", "description": "The whole preference set; a missing member falls back to the tenant's default.",
  "properties": {"language": {"type": "string"}, "timeZone": {"type": "string"}, "deliveryTime": ref("LocalTime"),
                 "quietHours": ref("QuietHours"), "weekdays": ref("Weekdays")}}
PLATFORM = {"type": "string", "enum": ["apns", "fcm"],
            "description": "apns: an iPhone (hex token); fcm: an Android phone (FCM registration token or Firebase Installation ID)"}
S["Device"] = {"type": "object", "additionalProperties": False, "required": ["token", "name", "environment", "platform", "registeredAt"],
  "properties": {"token": {"type": "string"}, "name": {"type": "string"}, "environment": {"type": "string", "enum": ["production", "sandbox"]},
                 "platform": PLATFORM, "registeredAt": {"type": "integer"}}}
S["DeviceList"] = {"type": "object", "additionalProperties": False, "required": ["devices"],
  "properties": {"devices": {"type": "array", "items": ref("Device")}}}
S["DeviceRequest"] = {"type": "object", "required": ["name"],
  "properties": {"name": {"type": "string"}, "environment": {"type": "string", "enum": ["production", "sandbox"]},
                 "platform": {**PLATFORM, "default": "apns"}}}
S["RegisterToken"] = {"type": "object", "required": ["DeviceToken", "DeviceName"],
  "properties": {"DeviceToken": {"type": "string", "description": "hex"}, "DeviceName": {"type": "string"}}}
S["Health"] = {"type": "object", "additionalProperties": False, "required": ["status"], "properties": {"status": {"const": "ok"}}}
S["Inspection"] = {"type": "object", "description": "The node's live state (see the README, \"Metrics and inspection\")."}
# admin
FIRST_DELIVERY = {"type": "string", "enum": ["next-delivery-time", "immediate"],
  "description": "when users created through administration start: at their first delivery time after they were created (the default), or with today's impulse at once when its time has passed (a welcome impulse)"}
LEARNED_TIMING = {"enabled": {"type": "boolean", "description": "learned delivery times on (off by default)"},
    "windowMinutes": {"type": "integer", "minimum": 30, "maximum": 360, "description": "how far from the stated time a user's impulse may move, either way (180)"},
    "holdoutShare": {"type": "number", "minimum": 0, "maximum": 0.5, "description": "the share of users kept on fixed times, to measure the effect (0.1)"}}
S["Tenant"] = {"type": "object", "additionalProperties": False,
  "required": ["id", "name", "defaultLanguage", "defaultTimeZone", "deliveryTime", "maxPushesPerDay", "weekdays", "apnsTopic", "pushExpiry", "suspended", "adminsManageAPNsCredentials", "firstDelivery", "learnedTiming", "createdAt"],
  "properties": {"id": {"type": "string"}, "name": {"type": "string"}, "defaultLanguage": {"type": "string"},
    "defaultTimeZone": {"type": "string"}, "deliveryTime": ref("LocalTime"), "maxPushesPerDay": {"type": "integer"},
    "quietHours": ref("QuietHours"), "weekdays": ref("Weekdays"),
    "apnsEnvironment": {"type": "string", "enum": ["production", "sandbox"]},
    "apnsTopic": {"type": "string"}, "pushExpiry": {"type": "string", "enum": ["end-of-day", "immediate"]},
    "suspended": {"type": "boolean"}, "adminsManageAPNsCredentials": {"type": "boolean"},
    "firstDelivery": FIRST_DELIVERY,
    "learnedTiming": {"type": "object", "additionalProperties": False, "required": ["enabled", "windowMinutes", "holdoutShare"],
      "properties": {**LEARNED_TIMING,
        "fallback": {"type": "object", "additionalProperties": False, "required": ["since", "weeks", "reason"],
          "description": "present while the safety valve keeps every user on their stated time: the holdout showed learned times read within the hour significantly less often, two weeks in a row; learnedTiming.resume turns learning back on",
          "properties": {"since": {"type": "string", "format": "date"}, "weeks": {"type": "array", "items": {"type": "string", "format": "date"}},
            "reason": {"type": "string"}}},
        "watchFrom": {"type": "string", "format": "date", "description": "the first week the safety valve judges again after learning was turned back on"}}},
    "createdAt": {"type": "string", "format": "date-time"}}}
settings_props = {"name": {"type": "string"}, "defaultLanguage": {"type": "string"}, "defaultTimeZone": {"type": "string"},
    "deliveryTime": ref("LocalTime"), "maxPushesPerDay": {"type": "integer", "minimum": 1, "maximum": 24},
    "quietHours": dict(ref("QuietHours"), description="default quiet hours; a start equal to the end removes them"),
    "weekdays": dict(ref("Weekdays"), description="the programme's days; users choose among them"),
    "apnsEnvironment": {"type": "string", "enum": ["production", "sandbox"], "description": "of tokens registered without one"},
    "apnsTopic": {"type": "string"}, "pushExpiry": {"type": "string", "enum": ["end-of-day", "immediate"]},
    "suspended": {"type": "boolean", "description": "suspended: no dispatch; its users and admins are refused (403)"},
    "adminsManageAPNsCredentials": {"type": "boolean", "description": "whether the tenant's admins may manage its APNs credentials (operators always may)"},
    "firstDelivery": FIRST_DELIVERY,
    "learnedTiming": {"type": "object", "additionalProperties": False, "properties": {**LEARNED_TIMING,
        "resume": {"type": "boolean", "description": "true: turns learning back on after the safety valve turned it off (judged again from the next Monday)"}},
      "description": "learned delivery times: the members given replace the tenant's"}}
S["TenantSettings"] = {"type": "object", "description": "Every member optional: those given replace the tenant's.", "properties": settings_props}
S["NewTenant"] = {"type": "object", "required": ["id"],
  "properties": dict({"id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"}}, **settings_props)}
S["TenantPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("Tenant")}, "next": NEXT}}
S["AdminUser"] = {"type": "object", "additionalProperties": False,
  "required": ["username", "lifeAreas", "enabled", "admin", "preferences", "createdAt"],
  "properties": {"username": {"type": "string"}, "language": {"type": "string"}, "lifeAreas": ref("LifeAreas"),
    "enabled": {"type": "boolean"}, "admin": {"type": "boolean"},
    "preferences": {"type": "object", "additionalProperties": False, "required": ["weekdays"],
      "properties": {"timeZone": {"type": "string"}, "deliveryTime": ref("LocalTime"), "quietHours": ref("QuietHours"), "weekdays": ref("Weekdays")}},
    "createdAt": {"type": "string", "format": "date-time"}}}
change_props = {"language": {"type": "string"}, "timeZone": {"type": "string"}, "deliveryTime": ref("LocalTime"),
    "quietHours": ref("QuietHours"), "weekdays": ref("Weekdays"), "lifeAreas": ref("LifeAreas"),
    "enabled": {"type": "boolean"}, "admin": {"type": "boolean", "description": "may use the tenant's admin API and /SendPush"}}
S["UserChanges"] = {"type": "object", "description": "Every member optional: those given replace the user's.", "properties": change_props}
S["NewUser"] = {"type": "object", "required": ["username", "password"],
  "properties": dict({"username": {"type": "string", "minLength": 1, "maxLength": 128}, "password": {"type": "string", "minLength": 1},
    "firstDelivery": dict(FIRST_DELIVERY, description="when this user starts; absent: as the tenant's firstDelivery says")}, **change_props)}
S["UserPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("AdminUser")}, "next": NEXT}}
S["LearnedTime"] = {"type": "object", "additionalProperties": False,
  "required": ["tenantLearns", "optedIn", "ownTime", "reason", "deliveries", "reads", "summary"],
  "properties": {"tenantLearns": {"type": "boolean"}, "optedIn": {"type": "boolean", "description": "a delivery time the user set themselves may be learned"},
    "ownTime": {"type": "boolean", "description": "the user set their delivery time themselves"},
    "nextDate": {"type": "string", "format": "date"}, "nextTime": ref("LocalTime"),
    "reason": {"type": "string", "enum": ["off", "holdout", "own-time", "learning", "no-reads", "learned"]},
    "deliveries": {"type": "integer", "minimum": 0}, "reads": {"type": "integer", "minimum": 0},
    "summary": {"type": "string", "description": "one line, e.g. \"07:30, from 23 reads of 30 deliveries\""}}}
S["LearnedTimeOptIn"] = {"type": "object", "required": ["optedIn"], "properties": {"optedIn": {"type": "boolean"}}}
# The app's body: its routes ignore members they do not know (the admin API refuses them).
S["MyLearnedTime"] = {"type": "object", "required": ["optedIn"], "properties": {"optedIn": {"type": "boolean"}}}
S["Password"] = {"type": "object", "required": ["password"], "properties": {"password": {"type": "string", "minLength": 1}}}
S["Operator"] = {"type": "object", "additionalProperties": False, "required": ["name", "createdAt"],
  "properties": {"name": {"type": "string"}, "createdAt": {"type": "string", "format": "date-time"}}}
S["NewOperator"] = {"type": "object", "required": ["name", "password"],
  "properties": {"name": {"type": "string", "pattern": "^[a-z0-9._-]{1,64}$"}, "password": {"type": "string", "minLength": 1}}}
S["OperatorPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("Operator")}, "next": NEXT}}
S["Erasure"] = {"type": "object", "additionalProperties": False, "required": ["erased"],
  "properties": {"erased": {"type": "object", "additionalProperties": False, "required": ["users", "devices", "deliveries", "reminders", "impulses", "mediaFiles"],
    "properties": {k: {"type": "integer", "minimum": 0} for k in ["users", "devices", "deliveries", "reminders", "impulses", "mediaFiles"]}}}}
S["AuditEntry"] = {"type": "object", "additionalProperties": False, "required": ["id", "at", "actor", "role", "action", "target"],
  "properties": {"id": {"type": "integer"}, "at": {"type": "string", "format": "date-time"}, "actor": {"type": "string"},
    "role": {"type": "string", "enum": ["operator", "tenant-admin"]}, "tenant": {"type": "string"}, "action": {"type": "string"},
    "target": {"type": "string"}, "requestId": {"type": "string"}}}
S["AuditPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("AuditEntry")}, "next": NEXT}}
S["UserExport"] = {"type": "object", "description": "Everything held of one user (the right of access); no password hash.",
  "required": ["exportedAt", "user", "devices", "deliveries", "reminders", "learnedTime"],
  "properties": {"exportedAt": {"type": "string", "format": "date-time"}, "user": {"type": "object"},
    "learnedTime": {"type": "object", "required": ["view", "evidence"], "properties": {"view": ref("LearnedTime"),
      "evidence": {"type": "array", "description": "per day kind and half hour: reads within the hour (and later that day) and misses", "items": {"type": "object"}}}},
    "devices": {"type": "array", "items": {"type": "object"}}, "deliveries": {"type": "array", "items": {"type": "object"}},
    "reminders": {"type": "array", "items": {"type": "object"}}}}

item_props = {"workingID": {"type": "string"}, "language": {"type": "string"}, "title": {"type": "string"},
    "descriptionShort": {"type": "string"}, "description": {"type": "string"}, "duration": {"type": "integer", "minimum": 0, "maximum": 1440},
    "action": {"type": "string", "enum": ["read", "do"]}, "single": {"type": "boolean"},
    "imageURLs": {"type": "array", "items": {"type": "string"}}, "videoURL": {"type": "string"}, "webURL": {"type": "string"},
    "lifeArea": {"type": "string", "enum": ["work", "career", "finances", "health", "fitness", "nutrition", "sleep", "family", "partnership", "friends", "leisure", "mindfulness"]},
    "series": {"type": "string"}, "seriesPosition": {"type": "integer", "minimum": 1}}
item_required = ["workingID", "language", "title", "descriptionShort", "description", "duration", "action", "single", "lifeArea"]
S["CatalogItemInput"] = {"type": "object", "description": "An impulse in the catalog format (what `broker catalog import` reads); `/media/` links must name files of the media folder.",
  "required": item_required, "properties": item_props}
S["CatalogItem"] = {"type": "object", "additionalProperties": False, "required": item_required + ["imageURLs", "retired"],
  "properties": dict(item_props, retired={"type": "boolean", "description": "no longer chosen; deliveries keep showing it"})}
S["CatalogDocument"] = {"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "items": ref("CatalogItemInput")}}}
S["CatalogPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("CatalogItem")}, "next": NEXT}}
S["ImportResult"] = {"type": "object", "additionalProperties": False, "required": ["inserted", "updated"],
  "properties": {"inserted": {"type": "integer", "minimum": 0}, "updated": {"type": "integer", "minimum": 0}}}
S["Retired"] = {"type": "object", "required": ["retired"], "properties": {"retired": {"type": "boolean"}}}
S["DeliverRequest"] = {"type": "object", "required": ["impulse"], "properties": {"impulse": {"type": "string", "description": "the impulse's workingID"}}}
S["LedgerPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("Delivery")}, "next": NEXT}}

def json_response(desc, schema, status="200"):
    return {status: {"description": desc, "content": {"application/json": {"schema": ref(schema)}}}}
def op(summary, responses, security, params=None, body=None, tags=None, desc=None):
    o = {"summary": summary, "responses": dict(responses), "security": security}
    if desc: o["description"] = desc
    if params: o["parameters"] = params
    if body: o["requestBody"] = body
    if tags: o["tags"] = tags
    return o
def jbody(schema, required=True):
    return {"required": required, "content": {"application/json": {"schema": ref(schema)}}}
def q(name, schema, desc):
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": desc}
def p(name, desc, schema=None):
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string"}, "description": desc}

BASIC = [{"basicAuth": []}]
ADMIN = [{"operatorToken": []}, {"basicAuth": []}]
NONE = []
NO_CONTENT = {"204": {"description": "done"}}

client = {}
client["/CurrentImpulse"] = {"get": op("The newest delivered impulses, in the first system's format (marks them fetched)",
    json_response("impulses, newest first", "ImpulseList"), BASIC, tags=["client"],
    params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "how many (10)"),
            q("since", {"type": "integer", "minimum": 0}, "only those after this sequence")])}
client["/RegisterToken"] = {"post": op("Registers the caller's device token (it moves from another user of the tenant)",
    NO_CONTENT, BASIC, tags=["client"],
    body={"required": True, "content": {"application/json": {"schema": ref("RegisterToken")},
                                        "application/x-www-form-urlencoded": {"schema": ref("RegisterToken")}}})}
client["/v1/impulses"] = {"get": op("My deliveries with their state, newest first (marks them fetched)",
    json_response("a page", "DeliveryPage"), BASIC, tags=["client"],
    params=[q("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "page size (10)"),
            q("since", {"type": "integer", "minimum": 0}, "only newer than this sequence"),
            q("before", {"type": "integer", "minimum": 1}, "only older than this sequence (the next page)")])}
imp = p("impulse", "the impulse's workingID")
client["/v1/impulses/{impulse}"] = {
    "get": op("One impulse delivered to me (marks it fetched)", json_response("the delivery", "Delivery"), BASIC, params=[imp], tags=["client"]),
    "post": op("Remind me of it later", json_response("the reminder; Location names it", "Reminder", "201"), BASIC, params=[imp],
               body=jbody("ReminderRequest"), tags=["client"])}
client["/v1/impulses/{impulse}/read"] = {"put": op("Marks it read (idempotent): the unread count is the badge",
    json_response("the delivery", "Delivery"), BASIC, params=[imp], tags=["client"])}
client["/v1/reminders"] = {"get": op("My pending reminders", json_response("reminders", "ReminderList"), BASIC, tags=["client"])}
rem = p("reminder", "the reminder's id", {"type": "integer"})
client["/v1/reminders/{reminder}"] = {
    "get": op("One of my reminders", json_response("the reminder", "Reminder"), BASIC, params=[rem], tags=["client"]),
    "delete": op("Cancels one of my reminders", NO_CONTENT, BASIC, params=[rem], tags=["client"])}
client["/v1/me"] = {"get": op("Who I am, my unread count and my preferences with the tenant's defaults filled in",
    json_response("the profile", "Profile"), BASIC, tags=["client"])}
client["/v1/me/preferences"] = {"put": op("Replaces my preferences", json_response("the profile", "Profile"), BASIC,
    body=jbody("Preferences"), tags=["client"])}
client["/v1/me/learned-time"] = {
    "get": op("My learned delivery time and why it is what it is", json_response("the learned time", "LearnedTime"), BASIC, tags=["client"]),
    "put": op("Lets a delivery time I set myself be learned, or not", json_response("the learned time", "LearnedTime"), BASIC,
              body=jbody("MyLearnedTime"), tags=["client"])}
client["/v1/devices"] = {"get": op("My devices", json_response("devices", "DeviceList"), BASIC, tags=["client"])}
tok = p("token", "the device token: hex for an iPhone, as FCM gave it for an Android phone")
client["/v1/devices/{token}"] = {
    "put": op("Registers or refreshes a device of mine", dict(json_response("refreshed or moved to me", "Device"),
              **json_response("registered; Location names it", "Device", "201")), BASIC, params=[tok], body=jbody("DeviceRequest"), tags=["client"]),
    "delete": op("Unregisters a device (logout); never removes another user's", NO_CONTENT, BASIC, params=[tok], tags=["client"])}
client["/v1/admin/inspect"] = {"get": op("The tenant's live state, for its admins", json_response("the view", "Inspection"), BASIC, tags=["client"])}
html = {"200": {"description": "the page", "content": {"text/html": {"schema": {"type": "string"}}}}}
client["/SendPush"] = {
    "get": op("The first system's admin page (tenant admins)", html, BASIC, tags=["client"]),
    "post": op("A command of the admin page: send, fill, clear, error, token (form fields and its CSRF token)", html, BASIC, tags=["client"],
               body={"required": True, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object",
                 "properties": {k: {"type": "string"} for k in ["command", "impulse", "target", "token", "csrf"]}}}}})}

paths = {}
for path, item in client.items():
    paths[path] = copy.deepcopy(item)
for path, item in client.items():
    prefixed = copy.deepcopy(item)
    for method, o in prefixed.items():
        o["parameters"] = [p("tenant", "the tenant's id")] + o.get("parameters", [])
    paths["/t/{tenant}" + path] = prefixed

paths["/health"] = {"get": op("Readiness for load balancers and Kubernetes", json_response("ready: the store takes a write and the node is not stopping", "Health"), NONE, tags=["operations"],
    desc="503 (problem `not-ready`, `Retry-After`) while the store cannot take a write within 2 s or a graceful stop has begun. APNs trouble does not make a node unready.")}
paths["/health/live"] = {"get": op("Liveness: the process answers (a store outage is no reason to restart it)", json_response("alive", "Health"), NONE, tags=["operations"])}
paths["/openapi.json"] = {"get": op("This document", {"200": {"description": "the OpenAPI document", "content": {"application/json": {"schema": {"type": "object"}}}}}, NONE, tags=["operations"])}
paths["/media/{path}"] = {"get": op("A public media file of `<dataDirectory>/media` (byte ranges, no login)",
    {"200": {"description": "the file", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
     "206": {"description": "a byte range", "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}},
     "416": {"description": "the range starts past the file's end (problem `range-not-satisfiable`)",
             "headers": {"Content-Range": {"description": "`bytes */<length>`: the file's length", "schema": {"type": "string"}}},
             "content": {"application/problem+json": {"schema": ref("Problem")}}}},
    NONE, params=[p("path", "the file's path below media/ (may hold slashes)")], tags=["operations"])}

T = ["operator"]
tid = p("id", "the tenant's id")
paths["/admin/v1/tenants"] = {
    "get": op("Every tenant", json_response("tenants", "TenantPage"), ADMIN, tags=T),
    "post": op("Creates a tenant", json_response("created; Location names it", "Tenant", "201"), ADMIN, body=jbody("NewTenant"), tags=T)}
paths["/admin/v1/tenants/{id}"] = {
    "get": op("A tenant", json_response("the tenant", "Tenant"), ADMIN, params=[tid], tags=T),
    "patch": op("Changes a tenant's settings; `suspended` suspends or resumes it", json_response("the tenant", "Tenant"), ADMIN,
                params=[tid], body=jbody("TenantSettings"), tags=T),
    "delete": op("Erases a tenant and all of its data but its audit trail", json_response("what was erased", "Erasure"), ADMIN,
                 params=[tid, dict(q("confirm", {"type": "string"}, "the tenant's id again"), required=True)], tags=T)}
paths["/admin/v1/operators"] = {
    "get": op("Operator accounts", json_response("accounts", "OperatorPage"), ADMIN, tags=T),
    "post": op("Adds an operator account", json_response("added", "Operator", "201"), ADMIN, body=jbody("NewOperator"), tags=T)}
audit_params = [q("before", {"type": "integer", "minimum": 1}, "entries before this id (the next page)"),
                q("limit", {"type": "integer", "minimum": 1, "maximum": 500}, "page size (100)")]
paths["/admin/v1/audit"] = {"get": op("The audit trail of every tenant, newest first", json_response("a page", "AuditPage"), ADMIN,
                                      params=audit_params, tags=T)}
TA = ["tenant admin"]
ten = p("tenant", "the tenant's id")
usr = p("username", "the username, percent-encoded")
paths["/t/{tenant}/admin/v1/tenant"] = {
    "get": op("The tenant's settings", json_response("the tenant", "Tenant"), ADMIN, params=[ten], tags=TA),
    "patch": op("Changes the tenant's programme: defaultLanguage, defaultTimeZone, deliveryTime, maxPushesPerDay, quietHours, weekdays, pushExpiry, firstDelivery, learnedTiming (the rest needs an operator: 403)",
                json_response("the tenant", "Tenant"), ADMIN, params=[ten], body=jbody("TenantSettings"), tags=TA)}
paths["/t/{tenant}/admin/v1/audit"] = {"get": op("The tenant's audit trail, newest first", json_response("a page", "AuditPage"), ADMIN,
                                                 params=[ten] + audit_params, tags=TA)}
paths["/t/{tenant}/admin/v1/users"] = {
    "get": op("The tenant's users by username", json_response("a page", "UserPage"), ADMIN, tags=TA,
              params=[ten, q("search", {"type": "string"}, "only usernames containing this (any case)"),
                      q("after", {"type": "string"}, "only usernames after this one (the next page)"),
                      q("limit", {"type": "integer", "minimum": 1, "maximum": 500}, "page size (100)")]),
    "post": op("Creates a user", json_response("created; Location names it", "AdminUser", "201"), ADMIN, params=[ten],
               body=jbody("NewUser"), tags=TA)}
paths["/t/{tenant}/admin/v1/users/{username}"] = {
    "get": op("A user", json_response("the user", "AdminUser"), ADMIN, params=[ten, usr], tags=TA),
    "patch": op("Changes a user", json_response("the user", "AdminUser"), ADMIN, params=[ten, usr], body=jbody("UserChanges"), tags=TA),
    "delete": op("Erases a user with their devices, deliveries, reminders and schedule (the right to erasure)",
                 json_response("what was erased", "Erasure"), ADMIN, params=[ten, usr], tags=TA)}
paths["/t/{tenant}/admin/v1/users/{username}/password"] = {
    "put": op("Replaces a user's password", NO_CONTENT, ADMIN, params=[ten, usr], body=jbody("Password"), tags=TA)}
paths["/t/{tenant}/admin/v1/users/{username}/learned-time"] = {
    "get": op("A user's learned delivery time and why it is what it is", json_response("the learned time", "LearnedTime"), ADMIN,
              params=[ten, usr], tags=TA),
    "put": op("Lets a delivery time the user set themselves be learned, or not (audited)", json_response("the learned time", "LearnedTime"),
              ADMIN, params=[ten, usr], body=jbody("LearnedTimeOptIn"), tags=TA)}
paths["/t/{tenant}/admin/v1/users/{username}/export"] = {
    "get": op("Everything held of a user, as one document (the right of access)", json_response("the export", "UserExport"), ADMIN,
              params=[ten, usr], tags=TA)}

impp = p("impulse", "the impulse's workingID")
paths["/t/{tenant}/admin/v1/impulses"] = {
    "get": op("The tenant's catalog, retired impulses included", json_response("the catalog", "CatalogPage"), ADMIN, params=[ten], tags=TA),
    "post": op("Imports impulses (created or replaced, all or none)", json_response("what was imported", "ImportResult"), ADMIN,
               params=[ten], body=jbody("CatalogDocument"), tags=TA)}
paths["/t/{tenant}/admin/v1/impulses/{impulse}"] = {
    "get": op("An impulse", json_response("the impulse", "CatalogItem"), ADMIN, params=[ten, impp], tags=TA),
    "put": op("Creates or replaces an impulse", dict(json_response("replaced", "CatalogItem"), **json_response("created", "CatalogItem", "201")),
              ADMIN, params=[ten, impp], body=jbody("CatalogItemInput"), tags=TA),
    "patch": op("Retires an impulse (never chosen again) or brings it back", json_response("the impulse", "CatalogItem"), ADMIN,
                params=[ten, impp], body=jbody("Retired"), tags=TA)}
paths["/t/{tenant}/admin/v1/users/{username}/deliveries"] = {
    "get": op("A user's deliveries, newest first", json_response("a page", "LedgerPage"), ADMIN, tags=TA,
              params=[ten, usr, q("before", {"type": "integer", "minimum": 1}, "older than this sequence (the next page)"),
                      q("limit", {"type": "integer", "minimum": 1, "maximum": 500}, "page size (50)")]),
    "post": op("Delivers an impulse to the user now, and pushes it", json_response("the delivery", "Delivery", "201"), ADMIN,
               params=[ten, usr], body=jbody("DeliverRequest"), tags=TA)}

S["UserImportReport"] = {"type": "object", "additionalProperties": False,
  "required": ["mode", "committed", "created", "updated", "unchanged", "rejected", "rows", "omitted"],
  "properties": {"mode": {"type": "string", "enum": ["per-row", "all-or-nothing"]},
    "committed": {"type": "boolean", "description": "false: an all-or-nothing import with rejected rows wrote nothing"},
    **{k: {"type": "integer", "minimum": 0} for k in ["created", "updated", "unchanged", "rejected"]},
    "omitted": {"type": "integer", "minimum": 0,
      "description": "rows counted but not listed: rows lists the first 1,000 rows written or unchanged and the first 1,000 rejected"},
    "rows": {"type": "array", "maxItems": 2000, "items": {"type": "object", "additionalProperties": False, "required": ["line", "result"],
      "properties": {"line": {"type": "integer", "minimum": 1}, "username": {"type": "string"},
        "result": {"type": "string", "enum": ["created", "updated", "unchanged", "rejected"]}, "reason": {"type": "string"}}}}}}
paths["/t/{tenant}/admin/v1/user-imports"] = {
    "post": op("Imports users from CSV or JSON lines, idempotent by username, read as the body arrives",
      dict(json_response("the per-row report", "UserImportReport"),
           **{"422": {"description": "an all-or-nothing import with rejected rows (nothing written): a problem with the report",
                      "content": {"application/problem+json": {"schema": {"allOf": [ref("Problem"), {"type": "object",
                        "properties": {"report": ref("UserImportReport")}}]}}}}}),
      ADMIN, tags=TA,
      desc="CSV: a header naming the columns (username, password, passwordHash, language, timeZone, deliveryTime, quietHours, weekdays, enabled, admin, and a column per life area); JSON lines: one user body per line, with password or passwordHash. A new username needs a password or a bcrypt passwordHash; a known one is updated with what its row gives. Bodies up to maxUploadBytes; no Idempotency-Key (the import is idempotent by username).",
      params=[ten, q("mode", {"type": "string", "enum": ["per-row", "all-or-nothing"]}, "per-row (default): each valid row is written; all-or-nothing: nothing unless every row is valid"),
        q("firstDelivery", {"type": "string", "enum": ["next-delivery-time", "immediate"]}, "when the new users start; absent: as the tenant's firstDelivery says")],
      body={"required": True, "content": {"text/csv": {"schema": {"type": "string"}},
                                          "application/x-ndjson": {"schema": {"type": "string"}}}})}

MEDIA_TYPES = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/heic", "video/mp4", "video/quicktime",
               "audio/mpeg", "audio/mp4", "audio/aac", "audio/wav", "audio/x-caf", "application/pdf"]
S["MediaFile"] = {"type": "object", "additionalProperties": False, "required": ["name", "path", "url", "contentType", "size", "modifiedAt"],
  "properties": {"name": {"type": "string"}, "path": {"type": "string", "description": "where it is served: /media/{tenant}/{name}, what the catalog links"},
    "url": {"type": "string"}, "contentType": {"type": "string", "enum": MEDIA_TYPES}, "size": {"type": "integer", "minimum": 1},
    "modifiedAt": {"type": "string", "format": "date-time"}}}
S["MediaPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("MediaFile")}, "next": NEXT}}
mname = p("name", "the file name: 1-128 of A-Z a-z 0-9 . _ -, not starting with '.', ending in the extension of its type",
          {"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"})
paths["/t/{tenant}/admin/v1/media"] = {
    "get": op("The files of the tenant's media folder", json_response("the files", "MediaPage"), ADMIN, params=[ten], tags=TA)}
paths["/t/{tenant}/admin/v1/media/{name}"] = {
    "put": op("Uploads a media file (created or replaced whole), read as the body arrives",
      dict(json_response("replaced", "MediaFile"), **json_response("created; Location is where it is served", "MediaFile", "201")),
      ADMIN, params=[ten, mname], tags=TA,
      desc="The name's extension, the Content-Type and the file's first bytes must name the same type (JPEG, PNG, GIF, WebP, HEIC, MP4, QuickTime, MP3, AAC, M4A, WAV, CAF or PDF): 415 when the Content-Type is not the name's, 422 when the content is not. Files up to maxUploadBytes (413 beyond), and a tenant's files up to mediaQuotaBytes. Served publicly at /media/{tenant}/{name}.",
      body={"required": True, "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in MEDIA_TYPES}}),
    "delete": op("Removes a media file (409 while an impulse in use links it)", NO_CONTENT, ADMIN, params=[ten, mname], tags=TA)}

S["APNsCredential"] = {"type": "object", "additionalProperties": False, "description": "An uploaded credential: what it is and where it stands in the rotation, never its secret.",
  "required": ["id", "kind", "topics", "fingerprint", "state", "createdAt"],
  "properties": {"id": {"type": "string"}, "kind": {"type": "string", "enum": ["token", "certificate"]},
    "teamID": {"type": "string"}, "keyID": {"type": "string"}, "topics": {"type": "array", "items": {"type": "string"}},
    "notAfter": {"type": "string", "format": "date-time"}, "fingerprint": {"type": "string", "description": "SHA-256 of the public key or the certificate, hex"},
    "state": {"type": "string", "enum": ["pending", "active", "failed", "unreadable"], "description": "pending: tried by the next pushes, the active one kept until APNs accepts one; active: in use; failed: APNs refused it (lastError); unreadable: this broker's credential key does not open it (upload it again)"},
    "createdAt": {"type": "string", "format": "date-time"}, "activatedAt": {"type": "string", "format": "date-time"}, "lastError": {"type": "string"}}}
S["APNsCredentialPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("APNsCredential")}, "next": NEXT}}
S["APNsCredentialUpload"] = {"type": "object", "description": "A signing key (teamID, keyID and privateKey, the .p8 file's PEM text) or a certificate (pkcs12, the bundle in base64, and passphrase).",
  "properties": {"teamID": {"type": "string", "pattern": "^[A-Z0-9]{10}$"}, "keyID": {"type": "string", "pattern": "^[A-Z0-9]{10}$"},
    "privateKey": {"type": "string"}, "pkcs12": {"type": "string", "contentEncoding": "base64"}, "passphrase": {"type": "string"}}}
cred = p("credential", "the credential's id")
paths["/t/{tenant}/admin/v1/apns-credentials"] = {
    "get": op("The tenant's uploaded APNs credentials, newest first (operators; its admins when allowed)", json_response("the credentials", "APNsCredentialPage"),
              ADMIN, params=[ten], tags=TA),
    "post": op("Uploads an APNs credential: checked, sealed at rest, tried by the next pushes and kept once APNs accepts one",
               json_response("uploaded, pending; Location names it", "APNsCredential", "201"), ADMIN, params=[ten],
               body=jbody("APNsCredentialUpload"), tags=TA,
               desc="A key must sign a provider token; a certificate must open with its passphrase, hold its key, name the tenant's apnsTopic and not have expired (422 otherwise). 409 when the broker has no credential key. Uploading again replaces a pending credential. The previous credential pushes until APNs accepts a push made with the new one; if APNs refuses the new one, it is marked failed and the previous one goes on.")}
paths["/t/{tenant}/admin/v1/apns-credentials/{credential}"] = {
    "get": op("An uploaded APNs credential", json_response("the credential", "APNsCredential"), ADMIN, params=[ten, cred], tags=TA),
    "delete": op("Deletes an uploaded APNs credential (with none left, the configuration's credential pushes)", NO_CONTENT, ADMIN,
                 params=[ten, cred], tags=TA)}

S["FCMCredential"] = {"type": "object", "additionalProperties": False, "description": "An uploaded FCM service account: what it is and where it stands in the rotation, never its key.",
  "required": ["id", "projectID", "clientEmail", "fingerprint", "state", "createdAt"],
  "properties": {"id": {"type": "string"}, "projectID": {"type": "string"}, "clientEmail": {"type": "string"}, "privateKeyID": {"type": "string"},
    "fingerprint": {"type": "string", "description": "SHA-256 of the public key, hex"},
    "state": {"type": "string", "enum": ["pending", "active", "failed", "unreadable"], "description": "pending: tried by the next Android pushes, the active one kept until FCM accepts one; active: in use; failed: FCM refused it (lastError); unreadable: this broker's credential key does not open it (upload it again)"},
    "createdAt": {"type": "string", "format": "date-time"}, "activatedAt": {"type": "string", "format": "date-time"}, "lastError": {"type": "string"}}}
S["FCMCredentialPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("FCMCredential")}, "next": NEXT}}
S["FCMCredentialUpload"] = {"type": "object", "required": ["serviceAccount"], "description": "The service account's JSON key file from the Firebase console, as an object (or as its text).",
  "properties": {"serviceAccount": {"oneOf": [{"type": "object"}, {"type": "string"}]}}}
paths["/t/{tenant}/admin/v1/fcm-credentials"] = {
    "get": op("The tenant's uploaded FCM service accounts, newest first (operators; its admins when allowed)", json_response("the credentials", "FCMCredentialPage"),
              ADMIN, params=[ten], tags=TA),
    "post": op("Uploads an FCM service account: checked, sealed at rest, tried by the next Android pushes and kept once FCM accepts one",
               json_response("uploaded, pending; Location names it", "FCMCredential", "201"), ADMIN, params=[ten],
               body=jbody("FCMCredentialUpload"), tags=TA,
               desc="The key must have project_id, client_email and private_key, an RSA key of at least 2048 bits that verifies what it signs (422 otherwise, naming the field). 409 when the broker has no credential key. Uploading again replaces a pending one. The previous account pushes until FCM accepts a push made with the new one; if FCM (or its token endpoint) refuses the new one, it is marked failed and the previous one goes on.")}
paths["/t/{tenant}/admin/v1/fcm-credentials/{credential}"] = {
    "get": op("An uploaded FCM service account", json_response("the credential", "FCMCredential"), ADMIN, params=[ten, cred], tags=TA),
    "delete": op("Deletes an uploaded FCM service account (with none left, the configuration's key file pushes)", NO_CONTENT, ADMIN,
                 params=[ten, cred], tags=TA)}

LIFE_AREAS = ["work", "career", "finances", "health", "fitness", "nutrition", "sleep", "family", "partnership", "friends", "leisure", "mindfulness"]
count = {"type": "integer", "minimum": 0}
S["EngagementCounts"] = {"type": "object", "additionalProperties": False,
  "description": "What became of deliveries counted on their report day: the local date a scheduled one is for, else the tenant's date when it was assigned.",
  "required": ["assigned", "pushed", "noDevice", "failed", "fetched", "read", "channels"],
  "properties": {"assigned": count, "pushed": {**count, "description": "accepted by a push service for at least one device"},
    "noDevice": {**count, "description": "settled without a push: the user had no device"},
    "failed": {**count, "description": "settled without an accepted push: every device's push was rejected or dropped"},
    "fetched": count, "read": count,
    "readRate": {"type": "number", "minimum": 0, "maximum": 1, "description": "read per assigned; absent without any"},
    "medianSecondsToRead": {**count, "description": "median time from push to read, estimated from buckets; absent without a read push"},
    "channels": {"type": "object", "additionalProperties": False, "required": ["apns", "fcm"],
      "description": "pushed deliveries and their reads by the channel that accepted the push; a delivery pushed to an iPhone and an Android phone counts on both",
      "properties": {name: ref("ChannelCounts") for name in ["apns", "fcm"]}}}}
S["ChannelCounts"] = {"type": "object", "additionalProperties": False, "required": ["pushed", "read"],
  "properties": {"pushed": count, "read": count,
    "readRate": {"type": "number", "minimum": 0, "maximum": 1, "description": "read per pushed; absent without any"}}}
S["DispatchCounts"] = {"type": "object", "additionalProperties": False,
  "required": ["active", "due", "skippedWeekday", "skippedStale", "deferredQuietHours"],
  "properties": {"active": {**count, "description": "enabled users the day concerned: due, or skipped by their weekdays"},
    "due": {**count, "description": "users whose day came (delivered, nothing to deliver, or skipped as stale)"},
    "skippedWeekday": {**count, "description": "the day is not among the user's weekdays"},
    "skippedStale": {**count, "description": "the day's time passed longer ago than the staleness limit (the broker was down)"},
    "deferredQuietHours": {**count, "description": "the delivery time fell inside the quiet hours and moved to their end"}}}
S["TimingArm"] = {"type": "object", "additionalProperties": False, "required": ["users", "deliveries", "readWithinHour", "read"],
  "description": "one arm's people whose time may be learned, and their deliveries folded a day after their push",
  "properties": {"users": {"type": "integer", "minimum": 0}, "deliveries": {"type": "integer", "minimum": 0},
    "readWithinHour": {"type": "integer", "minimum": 0, "description": "read within the hour of the push: the goal's measure"},
    "withinHourRate": {"type": "number"}, "read": {"type": "integer", "minimum": 0}, "readRate": {"type": "number"},
    "medianSecondsToRead": {"type": "integer"}}}
S["TimingDifference"] = {"type": "object", "additionalProperties": False, "required": ["estimate", "low", "high", "significant"],
  "description": "learned minus holdout, with a 95% interval that counts users (cluster-robust: a user's deliveries are one cluster)",
  "properties": {"estimate": {"type": "number"}, "low": {"type": "number"}, "high": {"type": "number"},
    "significant": {"type": "boolean", "description": "the interval leaves 0 out"}}}
S["TimingWeek"] = {"type": "object", "additionalProperties": False, "required": ["weekStart", "learned", "holdout"],
  "properties": {"weekStart": {"type": "string", "format": "date"}, "learned": ref("TimingArm"), "holdout": ref("TimingArm"),
    "withinHourDifference": ref("TimingDifference"), "readDifference": ref("TimingDifference")}}
S["EngagementReport"] = {"type": "object", "additionalProperties": False,
  "required": ["tenant", "from", "to", "total", "days", "impulses", "lifeAreas", "learnedTiming"],
  "properties": {"tenant": {"type": "string"}, "from": {"type": "string", "format": "date"}, "to": {"type": "string", "format": "date"},
    "total": ref("EngagementCounts"),
    "days": {"type": "array", "description": "every day of the range, oldest first", "items": {"type": "object", "additionalProperties": False,
      "required": ["day", "dispatch", "counts"], "properties": {"day": {"type": "string", "format": "date"},
        "dispatch": ref("DispatchCounts"), "counts": ref("EngagementCounts")}}},
    "impulses": {"type": "array", "description": "most assigned first", "items": {"type": "object", "additionalProperties": False,
      "required": ["impulseID", "counts"], "properties": {"impulseID": {"type": "string"},
        "title": {"type": "string", "description": "absent for an impulse no longer in the catalog"},
        "lifeArea": {"type": "string", "enum": LIFE_AREAS}, "counts": ref("EngagementCounts")}}},
    "lifeAreas": {"type": "array", "items": {"type": "object", "additionalProperties": False, "required": ["counts"],
      "properties": {"lifeArea": {"type": "string", "enum": LIFE_AREAS, "description": "absent for impulses no longer in the catalog"},
        "counts": ref("EngagementCounts")}}},
    "learnedTiming": {"type": "array", "description": "learned delivery times against the holdout, per week (Monday first; empty unless the tenant learned times)",
      "items": ref("TimingWeek")},
    "learnedTimingOverall": {**ref("TimingWeek"), "description": "the same over every week the range touches"}}}
report_params = [ten, q("from", {"type": "string", "format": "date"}, "the first day (yyyy-MM-dd); 29 days before to without it"),
                 q("to", {"type": "string", "format": "date"}, "the last day (yyyy-MM-dd); the tenant's today without it; at most 366 days in all")]
paths["/t/{tenant}/admin/v1/reports/engagement"] = {
    "get": op("The tenant's engagement per day, impulse and life area over a range of days",
              json_response("the report", "EngagementReport"), ADMIN, params=report_params, tags=TA,
              desc="Read from daily rows kept with the ledger's writes, never by scanning deliveries.")}
paths["/t/{tenant}/admin/v1/reports/engagement/{table}"] = {
    "get": op("One table of the engagement report as CSV",
              {"200": {"description": "the table: a header row, then a row per day, impulse or life area (RFC 4180)",
                       "content": {"text/csv": {"schema": {"type": "string"}}}}},
              ADMIN, tags=TA, params=report_params + [p("table", "the table", {"type": "string", "enum": ["days.csv", "impulses.csv", "life-areas.csv", "channels.csv", "learned-timing.csv"]})])}

WEBHOOK_EVENTS = ["delivery.pushed", "delivery.failed", "delivery.read", "device.removed", "user.created", "user.deleted"]
S["Webhook"] = {"type": "object", "additionalProperties": False,
  "required": ["id", "url", "events", "enabled", "createdAt", "pending", "delivered", "dropped"],
  "properties": {"id": {"type": "string"}, "url": {"type": "string", "format": "uri"},
    "events": {"type": "array", "items": {"type": "string", "enum": WEBHOOK_EVENTS}},
    "enabled": {"type": "boolean"}, "createdAt": {"type": "string", "format": "date-time"},
    "secret": {"type": "string", "description": "only in the answer that created or rotated it: signs every event (Impulse-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">)"},
    "previousSecretExpiresAt": {"type": "string", "format": "date-time", "description": "until then the previous secret signs too (a second v1)"},
    "pending": {**count, "description": "events waiting for the endpoint"},
    "delivered": {**count, "description": "events the endpoint answered 2xx"},
    "dropped": {**count, "description": "events given up: failing for a day, or not queued because the tenant's queue was full"},
    "lastAttemptAt": {"type": "string", "format": "date-time"}, "lastStatus": {"type": "integer"}, "lastError": {"type": "string"}}}
S["WebhookPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("Webhook")}, "next": NEXT}}
S["WebhookSettings"] = {"type": "object", "additionalProperties": False,
  "properties": {"url": {"type": "string", "description": "https only; not this machine or a private network unless the operator allows it"},
    "events": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": WEBHOOK_EVENTS}}, "enabled": {"type": "boolean"}}}
S["WebhookAttempt"] = {"type": "object", "additionalProperties": False,
  "required": ["eventID", "event", "at", "outcome", "durationMilliseconds"],
  "properties": {"eventID": {"type": "string"}, "event": {"type": "string", "enum": WEBHOOK_EVENTS},
    "at": {"type": "string", "format": "date-time"}, "outcome": {"type": "string", "enum": ["delivered", "retry", "dropped"]},
    "status": {"type": "integer"}, "error": {"type": "string"}, "durationMilliseconds": count}}
S["WebhookAttemptPage"] = {"type": "object", "additionalProperties": False, "required": ["items"],
  "properties": {"items": {"type": "array", "items": ref("WebhookAttempt")}, "next": NEXT}}
hook = p("webhook", "the endpoint's id")
paths["/t/{tenant}/admin/v1/webhooks"] = {
    "get": op("The tenant's webhook endpoints, with their queues and counts", json_response("the endpoints", "WebhookPage"), ADMIN, params=[ten], tags=TA),
    "post": op("Registers a webhook endpoint (url and events); the answer holds its secret, shown only here",
               json_response("registered; Location names it", "Webhook", "201"), ADMIN, params=[ten], body=jbody("WebhookSettings"), tags=TA,
               desc="Events are queued in the transaction of the change they tell of, sent as POSTs of JSON ({id, type, createdAt, tenant, data}) signed in Impulse-Signature, at least once and in order per user, retried with backoff for a day, then dropped and counted. At most 10 endpoints per tenant.")}
paths["/t/{tenant}/admin/v1/webhooks/{webhook}"] = {
    "get": op("A webhook endpoint", json_response("the endpoint", "Webhook"), ADMIN, params=[ten, hook], tags=TA),
    "patch": op("Changes an endpoint's url, events or enabled", json_response("the endpoint", "Webhook"), ADMIN, params=[ten, hook],
                body=jbody("WebhookSettings"), tags=TA),
    "delete": op("Deletes an endpoint with the events waiting for it", NO_CONTENT, ADMIN, params=[ten, hook], tags=TA)}
paths["/t/{tenant}/admin/v1/webhooks/{webhook}/secret"] = {
    "post": op("Rotates the endpoint's secret: the answer holds the new one; the previous one signs too for a day",
               json_response("the endpoint with its new secret", "Webhook"), ADMIN, params=[ten, hook], tags=TA)}
paths["/t/{tenant}/admin/v1/webhooks/{webhook}/attempts"] = {
    "get": op("The endpoint's latest attempts, newest first (the last 100 are kept)", json_response("the attempts", "WebhookAttemptPage"), ADMIN,
              params=[ten, hook, q("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "at most this many (50)")], tags=TA)}

idem = {"name": "Idempotency-Key", "in": "header", "required": False,
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
        "description": "a retry with the same key (and the same request) answers the first result and writes nothing again; another request under the key is refused (422)"}
for path in ["/admin/v1/tenants", "/admin/v1/operators", "/t/{tenant}/admin/v1/users", "/t/{tenant}/admin/v1/impulses",
             "/t/{tenant}/admin/v1/apns-credentials",
             "/t/{tenant}/admin/v1/users/{username}/deliveries"]:
    o = paths[path]["post"]
    o["parameters"] = o.get("parameters", []) + [idem]

# Each operation's problems: the statuses and codes it can answer (README, "REST API"), from what the operation
# is: guarded by credentials, in a tenant, naming a resource in its path, taking a body, creating. The fuzzer
# checks every answer against them (an undocumented status or code fails its run).
def problems(path, method, o):
    secured = bool(o["security"])
    admin = any(t in o.get("tags", []) for t in ["operator", "tenant admin"]) or path.endswith(("/SendPush", "/admin/inspect"))
    in_tenant = path.startswith("/t/{tenant}") or "client" in o.get("tags", [])
    names = [x["name"] for x in o.get("parameters", []) if x["in"] == "path" and x["name"] != "tenant"]
    body = "requestBody" in o
    idempotent = any(x["name"] == "Idempotency-Key" for x in o.get("parameters", []))
    creates = method == "post" and "201" in o["responses"] or method == "put" and "201" in o["responses"]
    codes = {"400": ["invalid-query", "invalid-request", "invalid-path", "malformed-request"], "503": ["storage-unavailable", "overloaded"]}
    if path == "/health": codes["503"].append("not-ready")
    if body:
        codes["400"] += ["malformed-body", "body-incomplete"] + (["unknown-member"] if admin and "client" not in o.get("tags", []) else [])
        codes["408"] = ["body-timeout", "upload-timeout"]
        codes["413"] = ["body-too-large", "too-large"]
        codes["415"] = ["unsupported-media-type"]
    if body or names:
        codes["422"] = ["invalid-input"]
    if secured:
        codes["401"] = ["unauthorized"]
        codes["403"] = ["account-disabled", "tenant-suspended", "forbidden"] + (["admin-required"] if admin else [])
        if path.endswith("/SendPush") and method == "post": codes["403"] += ["cross-origin", "csrf-token-invalid"]
        codes["429"] = ["too-many-attempts"]
    if in_tenant or path.startswith("/admin/v1/tenants/"):
        codes.setdefault("404", []).append("unknown-tenant")
    if in_tenant:
        codes.setdefault("429", []).append("tenant-over-share")
    if names or path.startswith("/admin/v1/tenants/") or in_tenant:
        codes.setdefault("404", []).insert(0, "not-found")
    if creates or idempotent or method == "delete" and path.endswith("/media/{name}"):
        codes["409"] = ["conflict"] + (["idempotency-key-in-progress"] if idempotent else [])
    if idempotent:
        codes.setdefault("422", []).append("idempotency-key-reused")
    if path.endswith("/v1/devices/{token}") and method == "put":
        codes["422"].append("platform-not-served")
    return codes

def problem_response(status, codes):
    return {"description": "a problem: " + ", ".join("`%s`" % c for c in codes),
            "content": {"application/problem+json": {"schema": {"allOf": [ref("Problem"), {"type": "object",
              "properties": {"type": {"enum": ["urn:impulse-broker:problem:" + c for c in codes]}}}]}}}}

for path, item in paths.items():
    for method, o in item.items():
        for status, codes in sorted(problems(path, method, o).items()):
            o["responses"].setdefault(status, problem_response(status, codes))

import re
# The admin API refuses members its bodies do not have (400 unknown-member, naming them); the app's routes do not.
for name in ["NewOperator", "NewTenant", "TenantSettings", "APNsCredentialUpload", "FCMCredentialUpload", "Retired", "NewUser", "UserChanges",
             "DeliverRequest", "Password", "WebhookSettings", "LearnedTimeOptIn"]:
    S[name]["additionalProperties"] = False
def op_id(method, path):
    words = [w for w in re.split(r"[/{}.-]+", path) if w]
    prefixed = words[:2] == ["t", "tenant"]
    if prefixed: words = words[2:]
    name = method + "".join(w[:1].upper() + w[1:] for w in words)
    return name + ("InTenant" if prefixed else "")
for path, item in paths.items():
    for method, o in item.items():
        o["operationId"] = op_id(method, path)
def link(path, method, status, name, target_path, target_method, parameters):
    paths[path][method]["responses"][status].setdefault("links", {})[name] = {
        "operationId": paths[target_path][target_method]["operationId"], "parameters": parameters}
for prefix in ["", "/t/{tenant}"]:
    extra = {"tenant": "$request.path.tenant"} if prefix else {}
    for target_method in ["get", "delete"]:
        link(prefix + "/v1/impulses/{impulse}", "post", "201", target_method + "Reminder",
             prefix + "/v1/reminders/{reminder}", target_method, dict(extra, reminder="$response.body#/id"))
for target_method in ["get", "patch", "delete"]:
    link("/t/{tenant}/admin/v1/users", "post", "201", target_method + "User", "/t/{tenant}/admin/v1/users/{username}",
         target_method, {"tenant": "$request.path.tenant", "username": "$response.body#/username"})
for target in ["/t/{tenant}/admin/v1/users/{username}/password", "/t/{tenant}/admin/v1/users/{username}/export"]:
    method = "put" if target.endswith("password") else "get"
    link("/t/{tenant}/admin/v1/users", "post", "201", ("reset" if method == "put" else "export") + "User", target,
         method, {"tenant": "$request.path.tenant", "username": "$response.body#/username"})
for target_method in ["get", "delete"]:
    link("/t/{tenant}/admin/v1/apns-credentials", "post", "201", target_method + "APNsCredential",
         "/t/{tenant}/admin/v1/apns-credentials/{credential}", target_method,
         {"tenant": "$request.path.tenant", "credential": "$response.body#/id"})
for target_method in ["get", "patch", "delete"]:
    link("/admin/v1/tenants", "post", "201", target_method + "Tenant", "/admin/v1/tenants/{id}", target_method,
         {"id": "$response.body#/id"})

doc = {"openapi": "3.1.0",
  "info": {"title": "Impulse Broker", "version": "1",
           "description": "The app's REST API (the first system's routes and /v1), the admin API for operators (/admin/v1) and tenant admins (/t/{tenant}/admin/v1), and the public routes. Every route of the app exists twice: under /t/{tenant}/ and, for the configured default tenant, without the prefix. Errors are RFC 9457 problems."},
  "servers": [{"url": "/"}],
  "tags": [{"name": "client", "description": "the app's API, HTTP Basic as the tenant's user"},
           {"name": "operator", "description": "node-wide administration"},
           {"name": "tenant admin", "description": "a tenant's administration, by its admins or an operator"},
           {"name": "operations", "description": "public routes"}],
  "paths": dict(sorted(paths.items())),
  "components": {"schemas": S, "securitySchemes": {
      "basicAuth": {"type": "http", "scheme": "basic", "description": "a user of the tenant (an admin for admin routes), or an operator account"},
      "operatorToken": {"type": "http", "scheme": "bearer", "description": "the configured operator token (operatorToken)"}}}}
print(json.dumps(doc, indent=2, ensure_ascii=False))
