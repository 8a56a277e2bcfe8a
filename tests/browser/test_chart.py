"""The model-input size chart in Chromium: the value under the pointer, the drops reached with Tab, the
point a page shown "as of" a message rings; screenshots in light, dark and at phone width."""

import re

import pytest
from playwright.sync_api import expect

from sessions.ingest.demo import append_long_run, long_run_messages
from sessions.ingest.session_store import update_session
from sessions.models import Session

from .conftest import SCREENSHOTS, sign_in
from .data import session_url
from .helpers import open_fold
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "agent-run"

# The screen position of a point given in the chart's viewBox units.
ON_SCREEN_JS = """([x, y]) => {
  const svg = document.querySelector('.chart svg[data-readings]');
  const p = svg.createSVGPoint(); p.x = x; p.y = y;
  const s = p.matrixTransform(svg.getScreenCTM());
  return [s.x, s.y];
}"""


@pytest.fixture
def run(users, project) -> Session:
    """An agent run of 400 messages compacted automatically as it grows: a sawtooth with a dozen drops
    (built once, then copied back)."""
    return stored(project, agent_run)


def agent_run(project) -> Session:
    update_session(project, KEY, {
        "title": "Agent run", "instructions": "You triage batch jobs.",
        "compaction": {"max_tokens": 1500, "keep_recent_tokens": 500, "auto": True},
    }, "test")
    append_long_run(project, KEY, long_run_messages(400))
    return Session.objects.get(project=project, key=KEY)


def open_chart(page, live_server, login, query: str = "", viewport=(1440, 900)):
    page.set_viewport_size({"width": viewport[0], "height": viewport[1]})
    login(page)
    page.goto(session_url(live_server.url, KEY) + query)
    open_fold(page, "chart")
    expect(page.locator(".chart svg[data-readings]")).to_be_visible()
    return page.locator(".chart svg[data-readings]")


def shoot(locator, name: str) -> None:
    """A screenshot of one element (the chart's box) into test-artifacts/screenshots/."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def readings(svg) -> list[tuple[int, int, float, float]]:
    raw = svg.get_attribute("data-readings")
    return [(int(s), int(t), float(x), float(y)) for s, t, x, y in (r.split() for r in raw.split(";"))]


def test_pointing_at_the_line_reads_out_that_point(live_server, login, page, run):
    svg = open_chart(page, live_server, login)
    readout = page.locator(".chart-readout")
    expect(readout).to_have_text(re.compile("Point at the line"))
    points = readings(svg)

    for seq, tokens, x, y in (points[len(points) // 3], points[-1]):
        page.mouse.move(*page.evaluate(ON_SCREEN_JS, [x, y + 2]))
        expect(readout).to_have_text(f"#{seq} · {tokens:,} tokens")
        pointer = page.locator(".chart .pointer circle")
        assert float(pointer.get_attribute("cx")) == x and float(pointer.get_attribute("cy")) == y
    expect(page.locator(".chart .pointer")).to_be_visible()
    shoot(page.locator(".chart-box"), "chart-hover-light")

    page.mouse.move(5, 5)
    expect(readout).to_have_text(re.compile("Point at the line"))
    assert page.js_errors == []


def test_tab_reaches_each_drop_with_a_visible_focus_ring_and_a_reading(live_server, login, page, run):
    open_chart(page, live_server, login)
    drops = page.locator(".chart svg a")
    assert drops.count() >= 8

    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('.chart svg a')"):
            break
    else:
        pytest.fail("Tab never reached a drop marker of the chart")
    first = drops.first
    expect(first).to_be_focused()
    label = first.get_attribute("aria-label")
    assert re.fullmatch(r"checkpoint \d+ after #\d+: input down to \d+ tokens", label)
    seq, tokens = int(first.get_attribute("data-seq")), int(first.get_attribute("data-tokens"))
    expect(page.locator(".chart-readout")).to_have_text(f"#{seq} · {tokens:,} tokens after a compaction (Enter shows what it changed)")
    ring = first.locator("circle").evaluate("c => [getComputedStyle(c).r, getComputedStyle(c).strokeWidth]")
    assert ring == ["8px", "4px"], "the focused marker grows and takes the focus colour"
    shoot(page.locator(".chart-box"), "chart-focus-light")

    page.keyboard.press("Tab")
    expect(drops.nth(1)).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/checkpoints/\d+/$"))


def test_a_page_shown_as_of_a_message_rings_that_point(live_server, login, page, run):
    as_of = 250
    svg = open_chart(page, live_server, login, f"?as_of={as_of}")
    ring = page.locator(".chart .as-of-point circle")
    expect(ring).to_be_visible()
    meter = page.locator(".meter[role=meter]").get_attribute("aria-valuenow")

    caption = page.locator(".chart figcaption").inner_text()
    tokens = int(re.search(rf"as of #{as_of}: (\d+) tokens", caption).group(1))
    assert tokens == int(meter), "the ring is the model input the page shows"
    before = [p for p in readings(svg) if p[0] <= as_of]
    after = [p for p in readings(svg) if p[0] > as_of]
    assert before[-1][2] <= float(ring.get_attribute("cx")) <= after[0][2]
    shoot(page.locator(".chart-box"), "chart-as-of-light")


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_the_chart_in_dark_mode_and_at_phone_width(live_server, login, browser, users, run, scheme):
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=scheme, has_touch=True)
    page = context.new_page()
    try:
        sign_in(page, live_server.url, "admin")
        page.goto(session_url(live_server.url, KEY) + "?as_of=300")
        open_fold(page, "chart")
        ring = page.locator(".chart .as-of-point circle")
        expect(ring).to_be_visible()
        plot = page.locator(".chart-plot").bounding_box()
        box = ring.bounding_box()
        assert plot["x"] <= box["x"] and box["x"] + box["width"] <= plot["x"] + plot["width"], \
            "on a phone the plot scrolls to the ringed point"
        caption = page.locator(".chart figcaption").bounding_box()
        assert caption["x"] >= 0, "only the plot scrolls, not the caption"
        page.locator(".chart-box").scroll_into_view_if_needed()  # below the page head on a phone
        # A peak near the ringed point (in view): not on a drop marker, which is a link.
        seq, tokens, x, y = max((p for p in readings(page.locator(".chart svg[data-readings]")) if 260 <= p[0] <= 300),
                                key=lambda p: p[1])
        page.touchscreen.tap(*page.evaluate(ON_SCREEN_JS, [x, y]))
        expect(page.locator(".chart-readout")).to_have_text(f"#{seq} · {tokens:,} tokens")
        shoot(page.locator(".chart-box"), f"chart-phone-{scheme}")
        if scheme == "dark":
            page.set_viewport_size({"width": 1440, "height": 900})
            shoot(page.locator(".chart-box"), "chart-dark")
    finally:
        context.close()
