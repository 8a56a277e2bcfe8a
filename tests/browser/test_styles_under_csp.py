"""Styles under the dashboard's Content-Security-Policy (`style-src 'self'`, no 'unsafe-inline'): Chromium
reports no violation on any kind of page, and what once needed inline styles still draws. The meters
are SVG with sizes as attributes, the chart is drawn, checkpoints take their palette colours. The
checks of test_xss_corpus run on every page too: its canary records every `securitypolicyviolation`.
(Style attributes htmx makes through the CSSOM, such as `style=""`, are allowed by the policy and
raise none; the HTML the server sends has no style attribute at all, which
tests/dashboard/test_inline_styles.py checks.) An injected style attribute is shown to be blocked, so
the policy is really enforced."""

import json

import pytest
from playwright.sync_api import expect

from sessions.dashboard.inspection import LISTED_CHECKPOINTS, PALETTE
from sessions.ingest.next_request import build_request
from sessions.models import Session

from .conftest import log_in
from .data import ACTOR, session_url
from .helpers import open_fold, show_panel
from .test_xss_corpus import Watch

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AIRLINE, LONG, OVER = "airline-support-42", "long-agent-run", "travel-assistant-7"

# The size and place of what is drawn, in CSS pixels.
BOX = "el => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; }"
# Colours of the palette as the browser computes them (background, left border) for each class cp-N.
PALETTE_COLOURS = """(n) => Array.from({length: n}, (_, i) => {
  const probe = document.createElement("li");
  probe.className = "checkpoint cp cp-" + i;
  document.querySelector(".checkpoints").appendChild(probe);
  const style = getComputedStyle(probe);
  const colours = [style.backgroundColor, style.borderLeftColor];
  probe.remove();
  return colours;
})"""


def box(locator) -> dict:
    return locator.evaluate(BOX)


def stop_colours(page) -> list[str]:
    return page.eval_on_selector_all(".meter stop", "els => els.map(e => getComputedStyle(e).stopColor)")


@pytest.fixture
def watch(live_server, page, users, demo):
    watch = Watch(page, live_server.url)
    page.goto(live_server.url + "/login/")  # not watch.goto: the log-in form's autofocus is Django's own
    assert page.evaluate("Array.from(window.__xssCanary)") == []
    log_in(page, live_server.url, "admin")
    watch.check("after logging in")
    return watch


def test_the_stylesheet_alone_styles_every_kind_of_page(watch, demo, shot):
    page = watch.page
    airline = Session.objects.get(project=demo, key=AIRLINE)
    request = build_request(demo, AIRLINE, messages=[{"role": "user", "content": "Any news?", "persist": False}],
                            actor=ACTOR).event
    checkpoint = airline.checkpoints.order_by("last_seq").last()

    # The sessions list: every mini meter is drawn, as wide as its share of max_tokens.
    watch.goto("/")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"  # ctxweb.css
    for key in (LONG, AIRLINE):
        session = Session.objects.get(project=demo, key=key)
        row = page.locator("table.sessions tbody tr", has=page.locator(f"a.key:text-is('{key}')"))
        meter, fill = box(row.locator(".mini-meter")), box(row.locator(".mini-meter rect"))
        assert (meter["width"], meter["height"]) == (140, 8), key
        share = session.input_tokens / session.compaction_settings().max_tokens
        assert fill["width"] == pytest.approx(140 * share, abs=1), key
        assert fill["height"] == 8

    # A session page with many checkpoints: the meter, the chart and the palette.
    watch.goto(session_url("", LONG))
    open_fold(watch.page, "chart")
    expect(page.locator(".chart-box figure.chart")).to_be_visible()
    watch.settle()
    meter = box(page.locator(".meter"))
    assert meter["width"] > 300 and meter["height"] == 14
    fill, keep, threshold = (box(page.locator(f".meter .{name}")) for name in ("fill", "keep", "threshold"))
    long = Session.objects.get(project=demo, key=LONG)
    compaction = long.compaction_settings()
    assert fill["width"] == pytest.approx(meter["width"] * long.input_tokens / compaction.max_tokens, abs=1)
    assert fill["height"] == 14 and fill["x"] == meter["x"]
    assert keep["width"] == pytest.approx(meter["width"] * compaction.keep_recent_tokens / compaction.max_tokens, abs=1)
    assert keep["x"] + keep["width"] == pytest.approx(fill["x"] + fill["width"], abs=0.5)
    assert (threshold["width"], threshold["height"]) == (2, 22)
    assert threshold["x"] == pytest.approx(meter["x"] + meter["width"], abs=0.5)
    assert stop_colours(page) == ["rgb(111, 207, 151)", "rgb(31, 138, 76)"]
    chart = box(page.locator("figure.chart svg[data-readings]"))
    line = box(page.locator("figure.chart polyline.size"))
    assert chart["width"] > 1000 and chart["height"] == 170 and line["width"] > 1000 and line["height"] > 50
    expect(page.locator("figure.chart circle.drop")).to_have_count(long.checkpoint_count)
    colours = page.evaluate(PALETTE_COLOURS, PALETTE)
    assert len(set(map(tuple, colours))) == PALETTE, colours  # every colour of the palette differs
    # The panel lists the newest LISTED_CHECKPOINTS, each in the colour of its number.
    items = page.locator(".checkpoints li.checkpoint")
    listed = min(long.checkpoint_count, LISTED_CHECKPOINTS)
    expect(items).to_have_count(listed)
    first_listed = long.checkpoint_count - listed  # the number of the first listed, less one
    for i in (0, 1, PALETTE - 1, PALETTE, listed - 1):
        item = items.nth(i)
        computed = item.evaluate("e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).borderLeftColor]")
        assert computed == colours[(first_listed + i) % PALETTE], i
    shot(page, "styles-under-csp-session")
    # Windows loaded through htmx: earlier raw messages and earlier events.
    for button, items in ((".raw-log button.more-earlier", ".raw-log .msg"), ("#events button.load", "#events li.event")):
        if button.startswith("#events"):
            show_panel(page, "Event history")
        shown = page.locator(items).count()
        page.locator(button).first.click()
        expect(page.locator(items)).not_to_have_count(shown)
    watch.settle()
    watch.check("long session, earlier windows loaded")

    # The session page with covered messages: they and their badges take their checkpoint's colour.
    watch.goto(session_url("", AIRLINE))
    open_fold(watch.page, "chart")
    expect(page.locator(".chart-box figure.chart")).to_be_visible()
    covered = page.locator(".raw-log .msg.code-covered_by_checkpoint")
    assert covered.count() > 0
    for message in covered.all():
        colour = message.evaluate("e => getComputedStyle(e).backgroundColor")
        badge = message.locator(".badge.covered").evaluate("e => getComputedStyle(e).backgroundColor")
        assert colour == badge and colour not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), colour
    # Interactions under the policy: select a message, hover a checkpoint.
    covered.first.locator("header .role").click()
    expect(covered.first.locator(".explain")).to_be_visible()
    show_panel(page, "Checkpoints")
    page.locator(".checkpoints .checkpoint").first.hover()
    watch.check("airline session after clicks")

    # Over max_tokens the meter turns red, full, with the threshold inside it.
    Session.objects.filter(project=demo, key=OVER).update(max_tokens=100)
    watch.goto(session_url("", OVER))
    expect(page.locator(".meter")).to_have_class("meter over")
    assert stop_colours(page) == ["rgb(243, 166, 131)", "rgb(192, 57, 43)"]
    meter, fill = box(page.locator(".meter")), box(page.locator(".meter .fill"))
    assert fill["width"] == pytest.approx(meter["width"], abs=0.5)
    assert box(page.locator(".meter .threshold"))["x"] < meter["x"] + meter["width"] / 2

    # Every other kind of page and fragment.
    for path in (f"/p/default/s/{AIRLINE}/checkpoints/{checkpoint.pk}/",
                 f"/p/default/s/{AIRLINE}/requests/{request.pk}/",
                 f"/p/default/s/{AIRLINE}/events/",
                 "/api-keys/", "/p/default/members/"):
        watch.goto(path)
    watch.goto("/search/?q=bag")
    expect(page.locator(".hit").first).to_be_visible()
    watch.goto("/import/")
    chat = [{"role": "user", "content": "imported"}, {"role": "assistant", "content": "stored"}]
    page.locator("input[type=file]").set_input_files(
        [{"name": "chat.json", "mimeType": "application/json", "buffer": json.dumps(chat).encode()}])
    with page.expect_navigation():
        page.locator("form.inline-form button.primary").click()
    expect(page.locator("#import-job")).to_be_visible()
    watch.check("the import job")

    # The policy is enforced: a style attribute put into the page is refused and reported.
    page.evaluate("""() => {
        const holder = document.createElement("div");
        holder.innerHTML = '<p id="injected" style="color: rgb(255, 0, 0)">styled</p>';
        document.body.appendChild(holder);
    }""")
    page.wait_for_function("() => window.__xssCanary.length >= 1")
    assert page.evaluate("getComputedStyle(document.getElementById('injected')).color") != "rgb(255, 0, 0)"
    violations = page.evaluate("Array.from(window.__xssCanary)")
    assert violations and all(v.startswith("csp style-src-attr blocked inline") for v in violations), violations
