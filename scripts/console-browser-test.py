#!/usr/bin/env python3
"""Drives the web console in a real headless Chromium (Debian's chromium and chromium-driver, through selenium).

Run by the Swift test ConsoleBrowserTests against a broker it started; the environment names it:
CONSOLE_URL (https://127.0.0.1:PORT), CONSOLE_TENANT, CONSOLE_ADMIN, CONSOLE_PASSWORD, CONSOLE_IMPULSE (an impulse
to deliver), CONSOLE_OPERATOR_TOKEN (to add an operator account), CONSOLE_SCREENSHOTS (a directory). Every step prints what it checked; the first failed check exits 1.
"""
import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["CONSOLE_URL"].rstrip("/")
TENANT = os.environ["CONSOLE_TENANT"]
ADMIN = os.environ["CONSOLE_ADMIN"]
PASSWORD = os.environ["CONSOLE_PASSWORD"]
IMPULSE = os.environ["CONSOLE_IMPULSE"]
SHOTS = os.environ["CONSOLE_SCREENSHOTS"]
OPERATOR_TOKEN = os.environ["CONSOLE_OPERATOR_TOKEN"]
CONSOLE = f"{BASE}/t/{TENANT}/console"
# The broker's certificate is self-signed for the test: trusted here, and by the browser below.
INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE
INSECURE.set_alpn_protocols(["http/1.1"])


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def submit(driver, button, shown):
    """Clicks a form's button and waits for the page the post leads to, not the one it was on, to show `shown`:
    the page before often shows a notice of its own, and a check made on it would race the post (a password check
    failed so under a loaded machine)."""
    # A mark on the window, which the next page does not have. Selenium's staleness_of asks the old page's element,
    # and Chromium may answer that with "node does not belong to the document" instead of "stale" mid-navigation (a
    # CI run failed so); a script's answer during the navigation is an error too, which means "not yet".
    driver.execute_script("window.impulseBeforePost = true")
    button.click()

    def left(d):
        try:
            return d.execute_script("return window.impulseBeforePost !== true && document.readyState === 'complete'")
        except WebDriverException:
            return False

    WebDriverWait(driver, 20).until(left)
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, shown))


def http(method, path, body=None, headers=None, auth=True):
    """A request outside the browser (the admin API, or a forged form post); returns (status, headers, text)."""
    request = urllib.request.Request(BASE + path, method=method, data=body, headers=headers or {})
    if auth:
        token = base64.b64encode(f"{ADMIN}:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, context=INSECURE, timeout=20) as response:
            return response.status, dict(response.headers), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, name.replace("/", "-") + ".png"))


def full_shot(driver, name):
    """A screenshot of the whole page, however long (the window grows to it, then goes back)."""
    size = driver.get_window_size()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(size["width"], min(height + 100, 4000))
    shot(driver, name)
    driver.set_window_size(size["width"], size["height"])


def no_alert(driver):
    try:
        driver.switch_to.alert
        return False
    except NoAlertPresentException:
        return True


def labelled(driver):
    """The page's visible controls without a label: their names (empty when all have one)."""
    return driver.execute_script("""
        return Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea'))
          .filter(e => !(e.id && document.querySelector('label[for="' + e.id + '"]')) && !e.getAttribute('aria-label'))
          .map(e => e.name || e.outerHTML);""")


def low_contrast(driver):
    """Text on the page below WCAG 2's AA contrast (4.5:1, 3:1 for large text): what it says and its ratio."""
    return driver.execute_script("""
        function rgba(text) {
          const m = text.match(/rgba?\\(([^)]+)\\)/);
          if (!m) { return [0, 0, 0, 1]; }
          const p = m[1].split(',').map(parseFloat);
          return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
        }
        function luminance(c) {
          const [r, g, b] = c.slice(0, 3).map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
          return 0.2126 * r + 0.7152 * g + 0.0722 * b;
        }
        function background(element) {
          for (let e = element; e; e = e.parentElement) {
            const c = rgba(getComputedStyle(e).backgroundColor);
            if (c[3] > 0.5) { return c; }
          }
          return [255, 255, 255, 1];
        }
        const failures = [];
        for (const element of document.querySelectorAll('body *')) {
          const own = Array.from(element.childNodes).some(n => n.nodeType === 3 && n.textContent.trim() !== '');
          if (!own || element.closest('svg') || element.getClientRects().length === 0) { continue; }
          const style = getComputedStyle(element);
          if (style.visibility === 'hidden' || parseFloat(style.opacity) === 0) { continue; }
          const fg = rgba(style.color), bg = background(element);
          const [a, b] = [luminance(fg), luminance(bg)];
          const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
          const size = parseFloat(style.fontSize), bold = parseInt(style.fontWeight) >= 700;
          const large = size >= 24 || (bold && size >= 18.66);
          if (ratio < (large ? 3 : 4.5)) { failures.push(element.textContent.trim().slice(0, 40) + ' ' + ratio.toFixed(2)); }
        }
        return failures;""")


def page_checks(driver, name):
    """Every page: its controls labelled, its text legible (contrast), a screenshot."""
    unlabelled = labelled(driver)
    check(unlabelled == [], f"the {name} page's controls are labelled {unlabelled}")
    faint = low_contrast(driver)
    check(faint == [], f"the {name} page's text has AA contrast {faint[:5]}")
    shot(driver, name)


def card(driver, label):
    for element in driver.find_elements(By.CSS_SELECTOR, ".card"):
        if element.find_element(By.CSS_SELECTOR, ".label").text == label:
            return int(element.find_element(By.CSS_SELECTOR, ".value").text)
    raise AssertionError(f"no card {label}")


def main():
    os.makedirs(SHOTS, exist_ok=True)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--ignore-certificate-errors",
                     "--window-size=1280,900", "--disable-gpu"]:
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    try:
        run(driver)
    finally:
        driver.quit()


def run(driver):
    # Signed out, the console asks to sign in; a wrong password is refused without saying which part was wrong.
    driver.get(CONSOLE)
    check(driver.current_url.endswith(f"/t/{TENANT}/console/sign-in"), "a signed-out visitor is sent to sign in")
    shot(driver, "sign-in")
    driver.find_element(By.ID, "name").send_keys(ADMIN)
    driver.find_element(By.ID, "password").send_keys("not-the-password" + Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: "Wrong name or password." in d.page_source)
    check("Wrong name or password." in driver.page_source, "a wrong password is refused")

    # Signed in with the keyboard alone.
    driver.find_element(By.ID, "name").send_keys(ADMIN)
    driver.find_element(By.ID, "password").send_keys(PASSWORD + Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: d.current_url == CONSOLE)
    check(driver.current_url == CONSOLE, "signing in opens today's page")
    cookie = driver.get_cookie("__Host-impulse-console")
    check(cookie is not None and cookie["secure"] and cookie["httpOnly"] and cookie.get("sameSite") == "Strict",
          "the session cookie is Secure, HttpOnly and SameSite=Strict")
    check(driver.find_element(By.CSS_SELECTOR, "svg.chart") is not None, "today's page draws the 30-day chart")
    full_shot(driver, "dashboard")
    assigned_before = card(driver, "assigned")
    status, headers, _ = http("GET", f"/t/{TENANT}/console", auth=False,
                              headers={"Cookie": f"__Host-impulse-console={cookie['value']}"})
    csp = headers.get("Content-Security-Policy", "")
    check(status == 200 and "script-src 'self'" in csp and "default-src 'none'" in csp,
          "pages carry a strict Content-Security-Policy")

    # Every visible control has a label (what a screen reader announces).
    unlabelled = labelled(driver)
    check(unlabelled == [], f"today's controls are labelled {unlabelled}")

    # Import users from a CSV: a per-row report, with the bad row refused and the others created.
    driver.get(CONSOLE + "/users")
    csv = "username,password,timeZone\nbrowser-anna,anna-pass-1,Europe/Berlin\nbrowser-ben,ben-pass-1,\n,nameless,\n"
    driver.find_element(By.ID, "csv").send_keys(csv)
    driver.find_element(By.CSS_SELECTOR, "form[action$='/users/import'] button[type=submit]").click()
    WebDriverWait(driver, 20).until(lambda d: "Import report" in d.title)
    check("2 created" in driver.page_source and "1 rejected" in driver.page_source,
          "the import reports 2 created and 1 rejected")
    shot(driver, "import-report")
    driver.get(CONSOLE + "/users?search=browser-")
    rows = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "tbody tr")]
    check(any("browser-anna" in row for row in rows) and any("browser-ben" in row for row in rows),
          "the imported users are listed")
    shot(driver, "users")

    # Deliver an impulse (over the admin API) and watch today's figures and the report change.
    driver.get(CONSOLE + "/report")
    report_before = card(driver, "assigned")
    status, _, body = http("POST", f"/t/{TENANT}/admin/v1/users/browser-anna/deliveries",
                           body=json.dumps({"impulse": IMPULSE}).encode(),
                           headers={"Content-Type": "application/json"})
    check(status == 201, f"an impulse is delivered to browser-anna ({status} {body[:120]})")
    changed = False
    for _ in range(30):
        driver.get(CONSOLE)
        if card(driver, "assigned") == assigned_before + 1:
            changed = True
            break
        time.sleep(0.5)
    check(changed, "today's page counts the new delivery")
    driver.get(CONSOLE + "/report")
    check(card(driver, "assigned") == report_before + 1, "the report's 30 days count the new delivery")

    # The report shows the impulse's title as text: markup in it is not run.
    driver.get(CONSOLE + "/report")
    check(no_alert(driver), "no script ran on the report page")
    cells = [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "td")]
    check(any("<script>" in cell for cell in cells), "a title with markup is shown as text")
    check(driver.execute_script("return document.querySelectorAll('img[src=x]').length") == 0,
          "the title's markup made no element")
    shot(driver, "report")
    link = driver.find_element(By.LINK_TEXT, "impulses.csv").get_attribute("href")
    status, headers, text = http("GET", link[len(BASE):], auth=False,
                                 headers={"Cookie": f"__Host-impulse-console={cookie['value']}"})
    check(status == 200 and headers.get("Content-Type", "").startswith("text/csv")
          and text.startswith("impulse_id,title,life_area,") and "<script>" in text,
          "the report's CSV downloads with the session (the title as data)")

    # Delete a user: asked first, then gone.
    driver.get(CONSOLE + "/users?search=browser-ben")
    driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-ben/delete'] button").click()
    driver.switch_to.alert.accept()
    WebDriverWait(driver, 20).until(lambda d: "User deleted" in d.title)
    check("browser-ben is deleted" in driver.page_source, "deleting a user says what went with it")
    driver.get(CONSOLE + "/users?search=browser-ben")
    check("No users match." in driver.page_source, "the deleted user is gone")

    # A user's page: opened from the list; settings saved, a refused one shown with its reason; an impulse delivered
    # now; the password replaced.
    driver.get(CONSOLE + "/users?search=browser-anna")
    driver.find_element(By.LINK_TEXT, "browser-anna").click()
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/users/browser-anna"))
    check("Deliveries" in driver.page_source and "Devices" in driver.page_source,
          "a user's page shows their devices and deliveries")
    check(IMPULSE in driver.find_element(By.XPATH, "//h2[text()='Deliveries']/following::table").text,
          "the user's page lists the delivery made over the admin API")
    driver.execute_script("document.getElementById('user-delivery').value = '09:30'")
    driver.execute_script("document.getElementById('user-quiet-start').value = '22:00'")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-anna/settings'] button[type=submit]"), "p.notice, p.error")
    check("both ends of the quiet hours" in driver.find_element(By.CSS_SELECTOR, "p.error").text,
          "a quiet-hours window with one end is refused with the reason")
    driver.execute_script("document.getElementById('user-delivery').value = '09:30'")
    driver.execute_script("document.getElementById('user-quiet-start').value = ''")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-anna/settings'] button[type=submit]"), "p.notice")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/users/browser-anna")
    check(status == 200 and json.loads(body)["preferences"].get("deliveryTime") == "09:30",
          "the user's delivery time is saved from their page")
    Select(driver.find_element(By.ID, "user-impulse")).select_by_value(IMPULSE)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-anna/deliver'] button[type=submit]"), "p.notice, p.error")
    check(f"{IMPULSE} is delivered to browser-anna" in driver.page_source, "an impulse is delivered from the user's page")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/users/browser-anna/deliveries")
    check(status == 200 and len(json.loads(body)["items"]) == 2, "the ledger holds the second delivery")
    driver.find_element(By.ID, "user-password").send_keys("anna-new-pass-2")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-anna/password'] button[type=submit]"), "p.notice, p.error")
    basic = base64.b64encode(b"browser-anna:anna-new-pass-2").decode()
    notices = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.notice, p.error")]
    status, _, body = http("GET", f"/t/{TENANT}/v1/me", auth=False, headers={"Authorization": f"Basic {basic}"})
    check(status == 200, f"the password replaced on the user's page signs in ({status} {body[:200]!r}; page: {notices})")
    # Learned delivery time: why hers is fixed, and her own time let be learned.
    learned = driver.find_element(By.ID, "learned-time").text
    check("learned times are off" in learned and "their own time, kept" in learned,
          f"the user's page says why their delivery time is fixed ({learned!r})")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/browser-anna/learned-time'] button[type=submit]"), "p.notice, p.error")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/users/browser-anna/learned-time")
    check(status == 200 and json.loads(body)["optedIn"] is True and "opted in" in driver.find_element(By.ID, "learned-time").text,
          "the user's own time may be learned, set from their page")
    page_checks(driver, "user")

    # The tenant's settings: a refused time zone keeps what was typed; then new users start with a welcome and the
    # programme leaves out Sunday.
    driver.get(CONSOLE + "/settings")
    zone = driver.find_element(By.ID, "settings-zone")
    zone.clear()
    zone.send_keys("Mars/Base")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/console/settings'] button[type=submit]"), "p.notice, p.error")
    check(driver.find_elements(By.CSS_SELECTOR, "p.error") != []
          and driver.find_element(By.ID, "settings-zone").get_attribute("value") == "Mars/Base",
          "a refused setting is shown with its reason and keeps what was typed")
    zone = driver.find_element(By.ID, "settings-zone")
    zone.clear()
    zone.send_keys("Europe/Berlin")
    Select(driver.find_element(By.ID, "settings-first")).select_by_value("immediate")
    driver.find_element(By.ID, "weekday-7").click()
    driver.find_element(By.ID, "settings-learned").click()
    driver.execute_script("document.getElementById('settings-learned-window').value = '120'")
    driver.execute_script("document.getElementById('settings-learned-holdout').value = '5'")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action$='/console/settings'] button[type=submit]"), "p.notice, p.error")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/tenant")
    tenant = json.loads(body)
    check(status == 200 and tenant["firstDelivery"] == "immediate" and tenant["weekdays"] == [1, 2, 3, 4, 5, 6]
          and tenant["learnedTiming"] == {"enabled": True, "windowMinutes": 120, "holdoutShare": 0.05},
          f"the tenant's settings are saved from the console ({tenant.get('firstDelivery')}, {tenant.get('weekdays')}, "
          f"{tenant.get('learnedTiming')})")

    # CSRF: a form post with the session's cookie but without its token, or from another site, is refused.
    session = {"Cookie": f"__Host-impulse-console={cookie['value']}",
               "Content-Type": "application/x-www-form-urlencoded"}
    status, _, _ = http("POST", f"/t/{TENANT}/console/users/browser-anna/delete", body=b"", headers=session, auth=False)
    check(status == 403, "a post without the CSRF token is refused (403)")
    csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value")
    status, _, _ = http("POST", f"/t/{TENANT}/console/users/browser-anna/delete", body=f"csrf={csrf}".encode(),
                        headers=dict(session, Origin="https://evil.example"), auth=False)
    check(status == 403, "a post from another origin is refused (403)")
    status, _, _ = http("GET", f"/t/{TENANT}/admin/v1/users/browser-anna")
    check(status == 200, "the refused posts deleted nothing")

    # Retire an impulse from the catalog page, and bring it back.
    driver.get(CONSOLE + "/catalog")
    form = f"form[action$='/catalog/{IMPULSE}/retired'] button"
    driver.find_element(By.CSS_SELECTOR, form).click()
    # Mid-reload, Chromium may answer for the old page's element with "node does not belong to the document", a
    # plain WebDriverException, rather than "stale": all of them mean "not yet".
    reloading = (NoSuchElementException, StaleElementReferenceException, WebDriverException)
    WebDriverWait(driver, 20, ignored_exceptions=reloading).until(
        lambda d: d.find_element(By.CSS_SELECTOR, form).text == "Bring back")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/impulses/{IMPULSE}")
    check(status == 200 and json.loads(body).get("retired") is True, "retiring from the catalog page retires it")
    shot(driver, "catalog")
    driver.find_element(By.CSS_SELECTOR, form).click()
    WebDriverWait(driver, 20, ignored_exceptions=reloading).until(
        lambda d: d.find_element(By.CSS_SELECTOR, form).text == "Retire")
    check(json.loads(http("GET", f"/t/{TENANT}/admin/v1/impulses/{IMPULSE}")[2]).get("retired") is False,
          "bringing it back puts it in use again")

    # Edit the impulse: its image is not in the media folder yet, so the form comes back with the error and what
    # was typed; once the image is uploaded on the media page, the same form saves.
    driver.get(CONSOLE + "/catalog")
    driver.find_element(By.CSS_SELECTOR, f"a[href$='/catalog/{IMPULSE}/edit']").click()
    WebDriverWait(driver, 20).until(lambda d: "Edit impulse" in d.title)
    check(labelled(driver) == [], "the impulse form's controls are labelled")
    title = driver.find_element(By.ID, "title")
    title.clear()
    title.send_keys("Edited <em>in</em> the browser")
    driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "p.error"))
    check("is not in the media folder" in driver.find_element(By.CSS_SELECTOR, "p.error").text,
          "an impulse linking a missing image is refused with the reason")
    check(driver.find_element(By.ID, "title").get_attribute("value") == "Edited <em>in</em> the browser",
          "the refused form keeps what was typed")
    shot(driver, "impulse-refused")
    image = os.path.join(SHOTS, f"{IMPULSE}.jpg")
    with open(image, "wb") as file:
        file.write(bytes([0xFF, 0xD8, 0xFF, 0xE0]) + bytes(range(256)) * 400)
    driver.get(CONSOLE + "/media")
    check(labelled(driver) == [], "the media page's controls are labelled")
    driver.find_element(By.ID, "file").send_keys(image)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[enctype='multipart/form-data'] button[type=submit]"), "p.notice, p.error")
    check(f"{IMPULSE}.jpg is uploaded" in driver.page_source, "a JPEG uploads from the browser")
    shot(driver, "media")
    status, _, _ = http("GET", f"/media/{TENANT}/{IMPULSE}.jpg", auth=False)
    check(status == 200, "the uploaded file is served")
    driver.get(f"{CONSOLE}/catalog/{IMPULSE}/edit")
    title = driver.find_element(By.ID, "title")
    title.clear()
    title.send_keys("Edited <em>in</em> the browser")
    submit(driver, driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]"), "p.notice, p.error")
    check(f"{IMPULSE} is saved" in driver.page_source, "the edited impulse saves")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/impulses/{IMPULSE}")
    check(json.loads(body).get("title") == "Edited <em>in</em> the browser", "the admin API shows the new title")
    check(driver.execute_script("return document.querySelectorAll('main em').length") == 0,
          "the title's markup is shown as text in the catalog")
    shot(driver, "catalog-edited")

    # Register a webhook: its secret is shown once; then turn it off.
    driver.get(CONSOLE + "/webhooks")
    driver.find_element(By.ID, "webhook-url").send_keys("https://hooks.example.com/impulse")
    driver.find_element(By.ID, "event-user-deleted").click()  # every event is ticked at first: leave one out
    submit(driver, driver.find_element(By.CSS_SELECTOR, f"form[action$='/console/webhooks'] button[type=submit]"), "p.notice, p.error")
    notice = driver.find_element(By.CSS_SELECTOR, "p.notice, p.error").text
    check("signing secret is whsec_" in notice, f"a registered webhook shows its secret once ({notice[:80]})")
    status, _, body = http("GET", f"/t/{TENANT}/admin/v1/webhooks")
    events = json.loads(body)["items"][0]["events"]
    check(status == 200 and "user.deleted" not in events and "delivery.read" in events,
          "the webhook takes the events ticked")
    driver.find_element(By.XPATH, "//button[text()='Turn off']").click()
    WebDriverWait(driver, 20, ignored_exceptions=reloading).until(
        lambda d: "is off" in d.find_element(By.CSS_SELECTOR, "p.notice").text)
    check(json.loads(http("GET", f"/t/{TENANT}/admin/v1/webhooks")[2])["items"][0]["enabled"] is False,
          "turning a webhook off in the console turns it off")

    # Every page: labelled controls, AA contrast, a screenshot; at a phone's width too.
    for page in ["", "report", "users", "users/browser-anna", "catalog", "media", "devices", "webhooks", "settings",
                 "audit"]:
        driver.get(f"{CONSOLE}/{page}" if page else CONSOLE)
        check(driver.find_element(By.TAG_NAME, "h1").text != "", f"the {page or 'today'} page renders")
        page_checks(driver, page or "today")
    # At a phone's width every page fits (wide tables scroll inside their own box).
    driver.set_window_size(390, 844)
    for page in ["", "report", "users", "users/browser-anna", "catalog", f"catalog/{IMPULSE}/edit", "media", "devices",
                 "webhooks", "settings", "audit"]:
        driver.get(f"{CONSOLE}/{page}" if page else CONSOLE)
        width = driver.execute_script("return document.documentElement.scrollWidth")
        check(width <= 400, f"the {page or 'today'} page fits a phone-sized window ({width} px)")
    driver.get(CONSOLE)
    shot(driver, "dashboard-phone")
    driver.set_window_size(1280, 900)

    # Sign out: the session ends on the server, so the old cookie opens nothing.
    driver.find_element(By.CSS_SELECTOR, "header form button").click()
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith("/console/sign-in"))
    check(driver.current_url.endswith(f"/t/{TENANT}/console/sign-in"), "signing out returns to sign-in")
    opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPSHandler(context=INSECURE))
    try:
        opener.open(urllib.request.Request(CONSOLE, headers={"Cookie": session["Cookie"]}), timeout=20)
        status = 200
    except urllib.error.HTTPError as error:
        status = error.code
    check(status == 303, "the signed-out session's cookie is sent to sign in again")

    # An operator: the tenants page creates a tenant with its first admin; the node page; a tenant's APNs page
    # with its credentials.
    status, _, body = http("POST", "/admin/v1/operators", body=json.dumps({"name": "browser-ops",
                                                                         "password": "browser-ops-1"}).encode(),
                           headers={"Content-Type": "application/json", "Authorization": f"Bearer {OPERATOR_TOKEN}"},
                           auth=False)
    check(status == 201, f"an operator account is added ({status} {body[:100]})")
    driver.get(f"{BASE}/console")
    check(driver.current_url.endswith("/console/sign-in"), "the operators' console asks to sign in")
    driver.find_element(By.ID, "name").send_keys("browser-ops")
    driver.find_element(By.ID, "password").send_keys("browser-ops-1" + Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: d.current_url == f"{BASE}/console")
    for field, value in [("tenant-id", "browser-co"), ("tenant-name", "Browser & Co"), ("tenant-zone", "Europe/Vienna"),
                         ("tenant-topic", "com.browser.impulse"), ("admin-username", "chief"),
                         ("admin-password", "chief-pass-1")]:
        driver.find_element(By.ID, field).send_keys(value)
    submit(driver, driver.find_element(By.CSS_SELECTOR, "form[action='/console/tenants'] button[type=submit]"), "p.notice, p.error")
    check("chief signs in at /t/browser-co/console" in driver.page_source, "an operator creates a tenant and its admin")
    page_checks(driver, "tenants")
    driver.find_element(By.CSS_SELECTOR, "form[action='/console/tenants/browser-co/suspended'] button").click()
    WebDriverWait(driver, 20, ignored_exceptions=reloading).until(
        lambda d: "is suspended" in d.find_element(By.CSS_SELECTOR, "p.notice").text)
    check(True, "suspending a tenant says what it means")
    driver.get(f"{BASE}/console/node")
    check("Tenants on this node" in driver.page_source, "the node page shows this node's state")
    page_checks(driver, "node")
    driver.get(CONSOLE + "/devices")
    check(driver.find_elements(By.ID, "teamID") != [], "an operator may upload the tenant's APNs signing key")
    page_checks(driver, "devices-operator")
    print("console browser test: passed", flush=True)


if __name__ == "__main__":
    main()
