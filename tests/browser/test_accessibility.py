"""WCAG 2.2 AA with axe-core (the script bundled by axe-playwright-python): every dashboard page, and
the htmx fragments as the session page shows them, the 400, 403, 404 and 500 pages, Django's admin and
the API docs, as admin and viewer (an editor's pages are the admin's less its controls), on the demo
data, in the light and the dark colour scheme: no violation of the rules tagged wcag2a, wcag2aa,
wcag21a, wcag21aa and wcag22aa (all of them in the first scheme a page shows, those that read colours in
the other; one rule is left out for one state of the API docs, see
DOCS_WITH_AN_OPERATION_OPEN). Then at a phone's 390x844 no page scrolls sideways and the
header folds into a menu. Screenshots of the sessions list and a session page at 1440x900 (light and
dark) and 390x844 go to test-artifacts/screenshots/."""

import pytest
from axe_playwright_python.base import AXE_SCRIPT

from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import update_session
from sessions.models import ImportJob, Session
from sessions.store.review_queues import create_queue
from sessions.store.reviews import add_review

from .conftest import SCREENSHOTS, sign_in
from .data import ACTOR, session_url

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WCAG = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]},
        "resultTypes": ["violations"]}
# The rules of WCAG whose outcome depends on colours, all that a second colour scheme can change: a page
# checked with every rule in one scheme is checked with these in the other (the other rules read the
# document's structure, names and roles, which the scheme leaves alone). Of the tagged rules above axe-core
# computes colours only in these two (its color-contrast and link-in-text-block checks).
COLOUR_RULES = {"runOnly": {"type": "rule", "values": ["color-contrast", "link-in-text-block"]},
                "resultTypes": ["violations"]}
LONG, AIRLINE, TRIMS = "long-agent-run", "airline-support-42", "shop-assistant-trims"


@pytest.fixture
def site(live_server, users, demo, settings):
    """The demo data, a recorded request, an import job: the URLs every role visits, the
    admin's and the API docs (visited as the admin), and the 400 and 500 pages (tests/browser/error_urls.py
    adds an address that fails each way; the live server runs with DEBUG off, so they are the site's)."""
    settings.ROOT_URLCONF = "tests.browser.error_urls"
    long_run = Session.objects.get(project=demo, key=LONG)
    # Pinned after its checkpoints were made: the session page and the diff list values kept and lost.
    update_session(demo, LONG, {"pinned_facts": [{"name": "first jobs", "pattern": "batch-0000[1-5]"}]})
    checkpoint = long_run.checkpoints.order_by("last_seq").last()
    event = build_request(demo, AIRLINE, messages=[{"role": "user", "content": "Any news?", "persist": False}],
                          actor=ACTOR).event
    job = ImportJob.objects.create(project=demo, user=users["admin"], file_name="chat.json", size=120,
                                   state="completed", bytes_read=120, sessions=1, messages=3)
    long_url, airline_url = session_url("", LONG), session_url("", AIRLINE)
    queue = create_queue(demo, admin_user := users["admin"], "Checkpointed runs", "has_checkpoints=1", ["lost-fact"])
    add_review(Session.objects.get(project=demo, key=AIRLINE), admin_user, "problem", ["lost-fact"], 2,
               "The summary dropped the order number.", [4], queue=queue)
    pages = {
        "sessions list": "/",
        "sessions list, filtered": "/?q=airline&project=default",
        "sessions list, metadata column": "/?column=model&sort=meta:model&meta=channel",
        "session page": long_url,
        "session page, as of a checkpoint": f"{airline_url}?as_of=4",
        "checkpoint diff": f"{long_url}checkpoints/{checkpoint.pk}/",
        "request view": f"{airline_url}requests/{event.pk}/",
        "session page with a request timeline": session_url("", TRIMS),
        "recorded request diff": f"{session_url('', TRIMS)}recorded/4/",
        "search": "/search/?q=refund",
        "compare two conversations": f"/compare/?project=default&a={AIRLINE}&b={LONG}",
        "compare two recorded requests": f"/compare/?project=default&a={TRIMS}&b={TRIMS}&a_request=2&b_request=6",
        "review queues": "/queues/",
        "a review queue": f"/queues/{queue.pk}/",
        "import page": "/import/",
        "import job": f"/import/{job.pk}/",
        "API keys": "/api-keys/",
        "members": "/p/default/members/",
        "project settings": "/p/default/settings/",
        "404 page": "/p/default/s/no-such-session/",
        "400 page": "/test-errors/400/",
        "500 page": "/test-errors/500/",
    }
    # Pages we do not write ourselves: Django's admin (templates/admin/ and static/admin-a11y.* fix it) and
    # django-ninja's Swagger UI (templates/ninja/swagger.html, static/swagger-a11y.css). The admin's
    # pages: the index, lists with filters, change forms with date and time inputs and the two-list selector.
    admin = users["admin"]
    admin_pages = {
        "admin index": "/admin/",
        "admin sessions": "/admin/ctx_sessions/session/",
        "admin session": f"/admin/ctx_sessions/session/{long_run.pk}/change/",
        "admin events": "/admin/ctx_sessions/event/",
        "admin project": f"/admin/ctx_sessions/project/{demo.pk}/change/",
        "admin user": f"/admin/auth/user/{admin.pk}/change/",
        "admin new group": "/admin/auth/group/add/",
        "admin password change": "/admin/password_change/",
        "API docs": "/api/v1/docs",
    }
    # Fragments that the session page loads on demand, put into its <main> the way htmx would.
    fragments = {
        "trace fragment": f"{airline_url}trace/?q=refund",
        "trace fragment, a pinned value": f"{long_url}trace/?q=batch-00001",
        "full message fragment": f"{long_url}messages/2/",
        "older raw log fragment": f"{long_url}log/?before=200",
        "what-if preview fragment": f"{airline_url}what-if/?keep_recent_tokens=0&force=1",
    }
    return {"base": live_server.url, "pages": pages, "fragments": fragments, "session": long_url,
            "admin_pages": admin_pages}


# axe-core's script (the one axe-playwright-python bundles) is given to a context once, as a script that
# every document runs before its own (add_init_script), instead of being sent into each page before a run as
# that library's Axe.run does. Only the violations travel back to Python, and only what the report prints
# of them.
AXE_RUN = """options => axe.run(options).then(results => results.violations.map(v =>
    `${v.id} (${v.nodes.length}): ` + v.nodes.slice(0, 4).map(n => n.target.join(" ")).join("; ")))"""


def open_page(browser):
    """A page at 1440x900 in the light scheme, in a context of its own, with axe-core in every document it
    shows. Close it with page.context.close()."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme="light")
    context.set_default_timeout(15_000)
    context.add_init_script(AXE_SCRIPT)
    page = context.new_page()
    page.scheme = "light"  # the scheme it shows, kept by switch_scheme
    return page


def violations_of(page, options=WCAG) -> list[str]:
    return page.evaluate(AXE_RUN, options)


def rules_for(scheme: str, first: bool, options=WCAG) -> dict:
    """Every rule of `options` in the first scheme a page is checked in, the colour rules in the next."""
    if first:
        return options
    return {**COLOUR_RULES, "rules": options.get("rules", {})}


# The page is settled when it has loaded (the load event's listeners ran, the admin's `setTimeout(…, 0)`
# from one too: a timer queued after it runs after it), no eager image is still loading (lazy ones off
# screen never start), and htmx has nothing in flight, swapping or settling (its afterSettle listeners in
# static/ctxweb.js have run). After the load event our pages ask for nothing on their own but the session
# page's live poll (every 3 s, hx-swap "none": it changes nothing here; the import job's poll stops once the
# job is done, as the test's is) and Swagger UI's schema, waited for in check_role. This replaces waiting
# for the network to be idle for 500 ms, which cost that much on every page. All of it is waited for in the
# page, in one call, checked again at every animation frame.
SETTLE = """async () => {
    const deadline = Date.now() + 15_000;
    if (document.readyState !== 'complete') await new Promise(done => addEventListener('load', done, {once: true}));
    await new Promise(done => setTimeout(done, 0));
    while (document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')
           || !Array.from(document.images).every(image => image.complete || image.loading === 'lazy')) {
        if (Date.now() > deadline) throw new Error('the page did not settle in 15 s');
        await new Promise(done => requestAnimationFrame(done));
    }
}"""


def settle(page):
    page.evaluate(SETTLE)


# The style recalculation that starts the colour transitions, and those transitions taken to their end.
END_TRANSITIONS = """() => {
    document.body.offsetHeight;
    document.getAnimations().forEach(a => a instanceof CSSTransition && a.finish());
}"""


def switch_scheme(page, scheme: str):
    """Recolour the loaded page, unless it shows `scheme` already, and end at once the colour transitions
    that starts (the admin's links fade their colour), so that axe measures the colours the scheme gives."""
    if page.scheme == scheme:
        return
    page.emulate_media(color_scheme=scheme)
    page.scheme = scheme
    page.evaluate(END_TRANSITIONS)


def each_scheme(page, schemes):
    """The page switched to each scheme of `schemes` in turn, the one it shows first: the page loaded next
    shows the last one, and is checked in that one first, so no page is switched back."""
    for scheme in sorted(schemes, key=lambda scheme: scheme != page.scheme):
        switch_scheme(page, scheme)
        yield scheme


def check_role(page, site, role: str, found: dict, shot=None, schemes=("light",)):
    """Every page (and, for the admin, the admin's pages and the API docs) as `role`, each checked in
    every colour scheme of `schemes`: the page is loaded once and its scheme switched in place."""
    base = site["base"]
    sign_in(page, base, role)

    def check(where: str, options=WCAG):
        for n, scheme in enumerate(each_scheme(page, schemes)):
            for line in violations_of(page, rules_for(scheme, n == 0, options)):
                found.setdefault(f"{role} {scheme} {where}", []).append(line)

    for name, url in site["pages"].items():
        page.goto(base + url)
        settle(page)
        if shot and name in ("sessions list", "session page"):
            for scheme in each_scheme(page, schemes):
                shot(page, f"a11y-{name.replace(' ', '-')}-1440-{scheme}")
        check(f"{name} {url}")
        if url == site["session"]:
            # Every panel of its fold bar opened (a folded panel's content is not rendered, so not checked
            # above), the size chart loaded into its panel.
            page.evaluate("document.querySelectorAll('#fold-bar details').forEach(d => { d.open = true; })")
            page.locator(".chart-box figure.chart").wait_for()
            settle(page)
            check("session page with every panel of its fold bar open")
            # The fragments the session page loads on demand, all put into its <main> the way htmx would, on
            # the load just checked.
            for fragment in site["fragments"].values():
                page.evaluate("url => htmx.ajax('GET', url, {target: 'main', swap: 'beforeend'})", base + fragment)
                settle(page)
            check("session page with its fragments " + ", ".join(site["fragments"]))
    if role == "admin":
        for name, url in site["admin_pages"].items():
            page.goto(base + url)
            settle(page)
            if url == "/api/v1/docs":
                page.wait_for_selector(".opblock-summary-control", timeout=60_000)  # Swagger UI drawn
                check(f"{name} {url}")
                open_an_operation(page)
                check(f"{name} {url} with an operation open", DOCS_WITH_AN_OPERATION_OPEN)
                continue
            check(f"{name} {url}")


def open_an_operation(page):
    """Swagger UI (a 1.4 MB script) drawn, then an operation opened for "Try it out"."""
    page.wait_for_selector(".opblock-summary-control", timeout=60_000)
    page.locator(".opblock-summary-post .opblock-summary-control").first.click()
    page.locator(".try-out__btn").first.click()
    page.wait_for_selector(".body-param textarea")


# Left out for this state only: `label`, because the request body's <textarea> that Swagger UI's own
# React code renders (.body-param__text) has no label, and no template or setting of ours reaches it.
DOCS_WITH_AN_OPERATION_OPEN = {**WCAG, "rules": {"label": {"enabled": False}}}


def test_no_wcag_violation_on_any_page_for_any_role_in_either_scheme(browser, site, shot):
    found: dict[str, list[str]] = {}
    # Roles change which controls a page shows, the scheme only its colours: the admin (who sees every
    # control) in both schemes on the same page load, and the viewer (who sees the fewest, and a 403) in
    # the light one. The editor is not checked apart: every control a template shows by role is behind
    # an `{% if perms.X %}` or `can_X` with no `else`, so an editor's page is the admin's less the key and
    # member controls; checking it as well cost a third of this test's 160 s.
    for role in ("admin", "viewer"):
        schemes = ("light", "dark") if role == "admin" else ("light",)
        page = open_page(browser)
        try:
            if role == "admin":  # the log-in pages, logged out, and a 403 as a viewer below
                for url in ("/login/", "/admin/login/"):
                    page.goto(site["base"] + url)
                    for n, scheme in enumerate(each_scheme(page, schemes)):
                        found.update({f"{url} logged out, {scheme}: {line}": []
                                      for line in violations_of(page, rules_for(scheme, n == 0))})
            check_role(page, site, role, found, shot if role == "admin" else None, schemes)
            if role == "admin":  # switching the scheme in place does recolour the page (one of ours: the
                page.goto(site["base"] + "/")  # last one checked, Swagger UI's, is transparent in both)
                backgrounds = []
                for scheme in schemes:
                    switch_scheme(page, scheme)
                    backgrounds.append(page.evaluate("getComputedStyle(document.body).backgroundColor"))
                assert len(set(backgrounds)) == 2, backgrounds
            if role == "viewer":
                page.goto(site["base"] + "/import/")  # a viewer may not import: the 403 page
                assert "403" in page.title() or page.locator("main").inner_text()
                for line in violations_of(page):
                    found.setdefault("viewer 403 page /import/", []).append(line)
        finally:
            page.context.close()
    report = "\n".join(f"{where}:\n  " + "\n  ".join(lines) for where, lines in found.items())
    if found:  # the whole list, for CI's artifacts, as well as in the assertion
        SCREENSHOTS.parent.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS.parent / "axe-violations.txt").write_text(report)
    assert found == {}, report


def test_no_page_scrolls_sideways_on_a_phone(browser, site, shot):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    wide = {}
    try:
        sign_in(page, site["base"], "admin")
        for name, url in {**site["pages"], **site["admin_pages"]}.items():
            page.goto(site["base"] + url)
            settle(page)
            if url == "/api/v1/docs":
                page.wait_for_selector(".opblock-summary-control", timeout=60_000)  # Swagger UI: a 1.4 MB script
            # Compared with the phone's 390 px: a mobile viewport widens to fit a page that overflows,
            # so window.innerWidth would grow with it.
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > 390:
                wide[f"{name} {url}"] = width
            if name in ("sessions list", "session page"):
                shot(page, f"a11y-{name.replace(' ', '-')}-390-light")
        # The header collapses into a Menu button that the keyboard opens; the menu holds the navigation,
        # the project switcher and log out, all on screen.
        page.goto(site["base"] + site["session"])  # the list page chooses the project in its filters instead
        header = page.locator("header.topbar").bounding_box()
        assert header["height"] < 60, header
        assert not page.locator("#project-switch").is_visible() and not page.locator(".logout button").is_visible()
        page.locator(".topbar-menu > summary").focus()
        page.keyboard.press("Enter")
        for selector in ("nav[aria-label=Main] a >> nth=0", "#project-switch", ".logout button"):
            box = page.locator(selector).bounding_box()
            assert page.locator(selector).is_visible(), selector
            assert box and 0 <= box["x"] and box["x"] + box["width"] <= 390, selector
        shot(page, "a11y-header-menu-open-390-light")
        page.keyboard.press("Escape")
        assert not page.locator("#project-switch").is_visible()
        assert page.evaluate("document.activeElement.matches('.topbar-menu > summary')")
        # The session page's two columns are tabs: one shown at a time, switched by the tab buttons.
        page.goto(site["base"] + site["session"])
        raw, model_input = page.locator("#raw-log-column"), page.locator("#model-input-column")
        assert raw.is_visible() and not model_input.is_visible()
        page.get_by_role("tab", name="Model input").click()
        assert model_input.is_visible() and not raw.is_visible()
        assert page.get_by_role("tab", name="Model input").get_attribute("aria-selected") == "true"
        shot(page, "a11y-session-page-model-input-tab-390-light")
    finally:
        context.close()
    assert wide == {}, wide


def test_no_wcag_violation_with_the_xss_corpus(browser, live_server, users, project):
    """The hostile corpus of tests/xss_seed.py (titles, notes, tool calls, images, api key and member
    names made of markup) in the same pages: still no violation, as admin, in the light scheme."""
    from tests.xss_seed import seed_corpus

    seeded = seed_corpus(project, users["admin"], image_base=live_server.url + "/static/favicon.svg?v=")
    group = seeded.groups[0]
    urls = ["/", "/?q=xssprobe", f"/search/?q={group.marker}", session_url("", group.session.key),
            session_url("", seeded.window.key),
            f"{session_url('', group.session.key)}checkpoints/{group.checkpoint.pk}/",
            f"{session_url('', group.session.key)}requests/{group.request.pk}/",
            "/api-keys/", "/p/default/members/"]
    page = open_page(browser)
    found = {}
    try:
        sign_in(page, live_server.url, "admin")
        for url in urls:
            page.goto(live_server.url + url)
            settle(page)
            if lines := violations_of(page):
                found[url] = lines
    finally:
        page.context.close()
    assert found == {}, "\n".join(f"{where}:\n  " + "\n  ".join(lines) for where, lines in found.items())
