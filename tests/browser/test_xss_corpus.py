"""No vector of the XSS corpus (tests/xss_corpus.py) runs in Chromium on any dashboard page,
and Chromium enforces the dashboard's Content-Security-Policy.

A canary installed before any page script records every call to alert/confirm/prompt/print and every
`securitypolicyviolation` event; dialogs are listened for too. After each page: no dialog, an empty
canary (a CSP violation would mean content was parsed as markup and tried to run), no window.__xss,
and nothing in the DOM that could only have come from content parsed as markup.
"""

import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.models import Session
from tests.xss_corpus import PAYLOADS, pack
from tests.xss_seed import TAG, WINDOW_KEY, import_files, seed_corpus

from .data import ACTOR, long_session, session_url
from .helpers import open_fold, show_panel
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def offline():
    """Pages that reach only the live server (conftest.py)."""
    return True

CANARY = """(() => {
  const log = [];
  Object.defineProperty(window, "__xssCanary", { value: log });
  for (const name of ["alert", "confirm", "prompt", "print"]) {
    const original = window[name];
    window[name] = function (...args) {
      log.push(name + "(" + args.map(String).join(", ") + ")");
      if (name !== "print") { return original.apply(window, args); }
    };
  }
  window.addEventListener("securitypolicyviolation", (e) => {
    log.push("csp " + e.effectiveDirective + " blocked " + e.blockedURI + " " + (e.sample || ""));
  }, true);
})();"""

# Everything on the page that could only have come from content parsed as markup.
INSPECT = r"""() => {
  const problems = [];
  const describe = (el) => "<" + el.localName + " " + Array.from(el.attributes).map(a => a.name + "=" +
      JSON.stringify(a.value.slice(0, 40))).join(" ").slice(0, 120) + ">";
  const URL_ATTRIBUTES = new Set(["href", "src", "action", "formaction", "xlink:href", "data", "poster",
      "background", "ping", "srcset", "codebase", "cite"]);
  const SCRIPT_URL = /^(javascript:|vbscript:|data:text\/html|data:application\/xhtml|data:text\/xml)/;
  const FORBIDDEN = new Set(["iframe", "frame", "frameset", "object", "embed", "applet", "base", "math",
      "animate", "set", "animatemotion", "animatetransform", "foreignobject", "use", "style", "marquee",
      "isindex", "template", "portal", "video", "audio", "source"]);
  for (const el of document.querySelectorAll("*")) {
    const tag = el.localName.toLowerCase();
    if (FORBIDDEN.has(tag)) { problems.push("element " + describe(el)); }
    if (el instanceof HTMLUnknownElement) { problems.push("unknown element " + describe(el)); }
    if (tag === "meta" && el.hasAttribute("http-equiv")) { problems.push("meta http-equiv " + describe(el)); }
    if (tag === "script" && !(el.src || "").startsWith(location.origin + "/static/")) {
      problems.push("script " + describe(el));
    }
    if (tag === "svg" && !el.closest("figure.chart, .meter, .mini-meter")) { problems.push("svg outside the chart and the meters " + describe(el)); }
    if (tag === "img" && !el.classList.contains("thumb")) { problems.push("image " + describe(el)); }
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      if (name.startsWith("on") || name.includes("hx-on")) { problems.push("handler " + describe(el)); }
      // The What if… panel's own buttons, and the list's "Compare the two ticked", post their form's fields
      // to a same-origin path of ours.
      const ownFormaction = name === "formaction" && tag === "button"
        && (el.id.startsWith("what-if-") || el.id === "compare-ticked")
        && attr.value.startsWith("/") && !attr.value.startsWith("//");
      if (name === "srcdoc" || (name === "formaction" && !ownFormaction)) { problems.push(name + " " + describe(el)); }
      if (name === "autofocus" && !(tag === "input" && el.name === "q")) { problems.push("autofocus " + describe(el)); }
      if (name === "style" && /url\(|expression|javascript|@import/i.test(attr.value)) {
        problems.push("style " + describe(el));
      }
      if (URL_ATTRIBUTES.has(name)) {
        const url = attr.value.replace(/[\u0000-\u0020\u007f]/g, "").toLowerCase();
        if (SCRIPT_URL.test(url)) { problems.push("script URL " + describe(el)); }
      }
    }
  }
  return {
    problems: problems.slice(0, 10),
    canary: Array.from(window.__xssCanary || ["(no canary: the init script did not run)"]),
    xss: typeof window.__xss === "undefined" ? null : String(window.__xss),
  };
}"""

# htmx marks the element whose request is in flight, the target being swapped and the new content
# settling; the new content's own requests (hx-trigger="load") start before its settling mark goes.
QUIET = """() => document.readyState === "complete"
    && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling")"""


class Watch:
    """Dialogs seen by Playwright, and the checks run on the page after each step."""

    def __init__(self, page, base_url: str):
        self.page, self.base_url, self.dialogs = page, base_url, []
        page.context.add_init_script(CANARY)
        page.on("dialog", lambda dialog: (self.dialogs.append(f"{dialog.type}: {dialog.message}"), dialog.dismiss()))
        # Nothing leaves the machine: image URLs point at the live server, anything else is refused (by
        # the page's context itself when it is offline, conftest.py).
        if not page.offline:
            page.context.route(re.compile(r"^https?://"), lambda route: route.continue_()
                               if route.request.url.startswith(base_url) else route.abort())

    def goto(self, path: str):
        response = self.page.goto(self.base_url + path)  # returns once the page and its scripts loaded
        assert response.status == 200, (path, response.status)
        self.check(path)

    def settle(self):
        """Until htmx has nothing in flight: no request, no swap, no new content settling. Exact, where
        waiting for the network to be idle for 500 ms cost half a second each time."""
        self.page.wait_for_function(QUIET)

    def check(self, label: str):
        found = self.page.evaluate(INSPECT)
        assert self.dialogs == [], (label, self.dialogs)
        assert found["canary"] == [], (label, found["canary"])
        assert found["xss"] is None, (label, found["xss"])
        assert found["problems"] == [], (label, found["problems"])
        assert self.page.js_errors == [], (label, self.page.js_errors)


@pytest.fixture
def corpus(live_server, users, project):
    """The corpus, its notes written by admin: seeded once per process, then copied back (stored_data.py)."""
    return stored(project, seed_served_corpus, live_server.url, users["admin"])


def seed_served_corpus(project, base_url: str, author):
    return seed_corpus(project, author, image_base=base_url + "/static/favicon.svg?v=")


@pytest.fixture
def watch(live_server, login, page):
    login(page, "admin")
    return Watch(page, live_server.url)


def open_session(watch: Watch, session: Session):
    page = watch.page
    watch.goto(session_url("", session.key))
    open_fold(watch.page, "chart")
    expect(page.locator(".chart-box figure.chart")).to_be_visible()  # the htmx chart fragment arrived
    messages = page.locator(".raw-log .msg")
    for n in (0, 4, 9):  # selecting a message opens its explain panel
        message = messages.nth(n)
        message.locator("header .role").click()
        expect(message.locator(".explain")).to_be_visible()
    for details in page.locator(".raw-log details.reasoning, .notes details").all()[:4]:
        details.locator("summary").click()
    show_panel(page, "Checkpoints")
    page.locator(".checkpoints .checkpoint").first.hover()
    show_panel(page, "Model input")
    if page.locator(".model-input .entry.summary").count():
        page.locator(".model-input .entry.summary").hover()
    watch.check(f"{session.key} after clicks")


def load_every_window(watch: Watch, button: str, items: str):
    """Click a "load more" button until there is none left; each click adds items through htmx."""
    page = watch.page
    for _ in range(20):
        if page.locator(button).count() == 0:
            return
        shown = page.locator(items).count()
        page.locator(button).first.click()
        expect(page.locator(items)).not_to_have_count(shown)
        watch.settle()
    raise AssertionError(f"{button} still there after 20 clicks")


def test_no_vector_runs_on_the_session_pages_and_their_fragments(corpus, watch, shot):
    page = watch.page
    for group in corpus.groups:
        open_session(watch, group.session)
        assert group.payloads[0] in page.locator("h1").inner_text()
        if group.number == 0:
            shot(page, "xss-corpus-session", full_page=True)
            page.evaluate("window.scrollTo(0, 0)")
            shot(page, "xss-corpus-session-top")
            page.locator("#m-6").scroll_into_view_if_needed()
            shot(page, "xss-corpus-session-messages")
            watch.goto(session_url("", group.session.key) + f"?as_of_checkpoint={group.checkpoint.pk}")

    # Messages arriving while the page is open come through the live fragment: on the last group's page,
    # opened and clicked through last in the loop.
    group = corpus.groups[-1]
    assert group.number != 0 and page.url.split("#")[0] == watch.base_url + session_url("", group.session.key)
    before = page.locator(".raw-log .msg").count()
    append_messages(corpus.project, group.session.key, [
        {"role": "user", "content": p, "name": p[:200], "attributes": {p: p}} for p in PAYLOADS[:20]], ACTOR)
    expect(page.locator(".raw-log .msg")).to_have_count(before + 20, timeout=10_000)
    watch.settle()
    watch.check("live messages")

    # The long session: load every earlier window of the raw log, the model input and the events.
    open_session(watch, corpus.window)
    for button, items in ((".raw-log button.more-earlier", ".raw-log .msg"),
                          (".model-input button.load", ".model-input .entry"),
                          ("#events button.load", "#events li.event")):
        show_panel(page, "Event history" if button.startswith("#events") else "Model input")
        load_every_window(watch, button, items)
    expect(page.locator(".raw-log .msg")).to_have_count(corpus.window.message_count)
    watch.check(f"{WINDOW_KEY}, every window loaded")
    watch.goto(session_url("", WINDOW_KEY) + "?seq=1")
    load_every_window(watch, ".raw-log button.more-later", ".raw-log .msg")
    watch.check(f"{WINDOW_KEY} from #1, later window loaded")

    # The SVG image's thumbnail link opens nothing that runs. Last: after that click Chromium runs this
    # page's animation frames once a second, which makes every later click and hover take 1-2 s.
    watch.goto(session_url("", corpus.groups[0].session.key))
    page.locator(".raw-log a[href^='data:image/svg+xml']").click()
    page.wait_for_timeout(500)
    for other in page.context.pages:
        assert other.evaluate("Array.from(window.__xssCanary || [])") == [], other.url
    watch.check("after opening the SVG thumbnail")


def test_no_vector_runs_on_the_list_search_diff_and_request_pages(corpus, watch):
    page = watch.page
    watch.goto("/?size=100")
    watch.goto(f"/?tag={TAG}&size=100")
    watch.goto("/?q=xssprobe03")
    # Typing into the list's search box filters through htmx; what was typed stays in the form.
    for payload in PAYLOADS[:8]:
        with page.expect_response(lambda r: "q=" in r.url):
            page.locator("form.filters input[name=q]").fill(payload)
        watch.settle()
        watch.check(f"sessions list filtered by {payload!r}")
    watch.goto("/search/?" + urlencode({"q": " ".join(PAYLOADS[:4])}))
    for group in corpus.groups:
        key = group.session.key
        watch.goto(f"/search/?q={group.marker}")
        expect(page.locator(".hit").first).to_be_visible()
        watch.goto(f"/p/default/s/{key}/checkpoints/{group.checkpoint.pk}/")
        assert group.payloads[-1] in page.locator("section.diff-summary").inner_text()
        watch.goto(f"/p/default/s/{key}/requests/{group.request.pk}/")
    watch.goto(f"/p/default/s/{WINDOW_KEY}/checkpoints/{corpus.window_checkpoint.pk}/")
    watch.goto("/search/")
    for payload in PAYLOADS[8:16]:
        with page.expect_response(lambda r: "/search/?" in r.url):
            page.locator("form.filters input[name=q]").fill(payload)
        watch.settle()
        watch.check(f"search typed {payload!r}")


def test_no_vector_runs_on_the_api_keys_members_and_import_pages(corpus, watch):
    page = watch.page
    watch.goto("/api-keys/")
    expect(page.locator("table.sessions")).to_contain_text(PAYLOADS[0])
    for names in pack(PAYLOADS, 100, " ")[:6]:
        page.locator("form.inline-form input[name=name]").fill(" ".join(names))
        with page.expect_navigation():
            page.locator("form.inline-form button.primary").click()
        watch.settle()
        watch.check(f"API key named {names!r} created")
    watch.goto("/p/default/members/")
    expect(page.locator("table.sessions")).to_contain_text(PAYLOADS[0])
    for names in pack(PAYLOADS, 1000, " "):
        page.locator("form.inline-form input[name=username]").fill(" ".join(names))
        with page.expect_navigation():
            page.locator("form.inline-form button.primary").click()
        watch.settle()
        watch.check("unknown member named with vectors")
    indexes = list(range(len(PAYLOADS)))
    for start in range(0, len(indexes), 50):
        watch.goto("/import/")
        files = [{"name": name, "mimeType": "application/json", "buffer": data}
                 for name, data in import_files(indexes[start:start + 50])]
        page.locator("input[type=file]").set_input_files(files)
        with page.expect_navigation():
            page.locator("form.inline-form button.primary").click()
        watch.settle()
        expect(page.locator(".import-summary")).to_contain_text("failed")
        watch.check(f"import of vectors {start}-{start + 49}")


def test_the_checks_catch_vectors_parsed_as_markup(live_server, page):
    """The same checks on a page that renders the corpus as markup, once with our CSP and once without:
    they must fail, or they prove nothing."""
    from sessions.access.middleware import ContentSecurityPolicy

    watch = Watch(page, live_server.url)
    body = "".join(f"<div>{p}</div>" for p in PAYLOADS).encode()
    html = b"<!doctype html><html><body><main>" + body + b"</main></body></html>"

    def serve(policy):
        headers = {"Content-Type": "text/html; charset=utf-8"} | ({"Content-Security-Policy": policy} if policy else {})
        return lambda route: route.fulfill(status=200, headers=headers, body=html)

    for policy in (ContentSecurityPolicy.POLICY, None):
        page.route(live_server.url + "/unsafe/", serve(policy))
        page.goto(live_server.url + "/unsafe/", wait_until="domcontentloaded")
        page.wait_for_timeout(1000)
        with pytest.raises(AssertionError):
            watch.check("the corpus as markup")
        found = page.evaluate(INSPECT)
        assert len(found["problems"]) >= 10
        if policy:
            assert found["canary"] and all(c.startswith("csp ") for c in found["canary"]), found["canary"][:3]
        else:
            assert any(c.startswith("alert(") for c in found["canary"]), found["canary"][:3]
            assert watch.dialogs
        watch.dialogs.clear()
        page.js_errors.clear()
        page.unroute(live_server.url + "/unsafe/")


# --- the Content-Security-Policy, enforced ----------------------------------------------------------


def test_chromium_enforces_the_csp_and_the_dashboard_still_works_under_it(live_server, login, page, project):
    session = long_session(project, count=120)
    outcome = compact(session, force=True, keep_recent_tokens=1, actor=ACTOR)
    assert outcome.status == "completed", outcome.reason
    login(page, "admin")
    watch = Watch(page, live_server.url)
    watch.goto(session_url("", session.key))
    open_fold(watch.page, "chart")

    # An inline script put into the DOM does not run; Chromium reports the violation.
    ran = page.evaluate("""() => {
        const script = document.createElement("script");
        script.textContent = "window.__xss = 'inline script ran'";
        document.body.appendChild(script);
        const holder = document.createElement("div");
        holder.innerHTML = '<img src="/static/favicon.svg?handler" onload="window.__xss = \\'handler ran\\'">';
        document.body.appendChild(holder);
        return window.__xss;
    }""")
    assert ran is None
    page.wait_for_function("() => window.__xssCanary.length >= 2")
    assert page.evaluate("window.__xss") is None
    violations = page.evaluate("Array.from(window.__xssCanary)")
    assert any(v.startswith("csp script-src-elem blocked inline") for v in violations), violations
    assert any(v.startswith("csp script-src-attr blocked inline") for v in violations), violations

    # Our own scripts still run: htmx loaded the chart and loads earlier windows, and hovering a
    # checkpoint highlights what it covers.
    expect(page.locator(".chart-box figure.chart")).to_be_visible()
    shown = page.locator(".raw-log .msg").count()
    page.locator(".raw-log button.more-earlier").click()
    expect(page.locator(".raw-log .msg")).not_to_have_count(shown)
    show_panel(page, "Checkpoints")
    checkpoint = page.locator(".checkpoints .checkpoint").first
    checkpoint.hover()
    lo, hi = map(int, checkpoint.get_attribute("data-covers").split("-"))
    highlighted = page.eval_on_selector_all(".raw-log .msg.highlight", "els => els.map(e => Number(e.dataset.seq))")
    assert highlighted and all(lo <= seq <= hi for seq in highlighted), (lo, hi, highlighted[:5])
    page.locator(".raw-log .msg").last.locator("header .role").click()
    expect(page.locator(".raw-log .msg").last.locator(".explain")).to_be_visible()
    assert page.evaluate("window.__xss") is None
    assert page.js_errors == []
