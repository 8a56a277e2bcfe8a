"""The request timeline of a session rebuilt from recorded requests, in Chromium: from the session page to
the diff of a request that dropped messages, by the table's link and by Tab and Enter on its bars; and
screenshots of both pages at 1440x900 and 390x844, light and dark."""

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.recorded_sessions import FIRST_QUESTION, SUMMARY, rebuilt_session

from .conftest import SCREENSHOTS, sign_in
from .data import session_url
from .helpers import open_fold
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "rebuilt"


@pytest.fixture
def rebuilt(users, project):
    return stored(project, rebuilt_session, KEY)  # built once, then copied back


def test_a_viewer_follows_a_diff_link_and_reads_the_dropped_message(live_server, page, rebuilt):
    sign_in(page, live_server.url, "viewer")
    page.goto(session_url(live_server.url, KEY))
    open_fold(page, "requests")
    timeline = page.locator("#request-timeline")
    expect(timeline).to_be_visible()
    row = timeline.locator("#request-4")
    expect(row).to_contain_text("4 dropped")
    expect(row).to_contain_text("1 own")
    row.get_by_role("link", name="#4").click()
    expect(page.locator("h1")).to_have_text("Request 4: what changed since request 3")
    dropped = page.locator(".diff-dropped")
    expect(dropped.locator("article").first).to_contain_text(FIRST_QUESTION)
    # The dropped message links to itself in the raw log.
    dropped.locator("article").first.get_by_role("link", name="#1").click()
    expect(page.locator("#m-1")).to_contain_text(FIRST_QUESTION)
    assert page.js_errors == []


def test_the_bars_are_reached_with_tab_and_named(live_server, page, rebuilt):
    sign_in(page, live_server.url, "viewer")
    page.goto(session_url(live_server.url, KEY))
    open_fold(page, "requests")
    bars = page.locator(".timeline-chart svg a")
    expect(bars).to_have_count(5)
    label = bars.nth(4).get_attribute("aria-label")
    assert "request 5" in label and "2 messages dropped by the application" in label and "1 message of its own" in label
    bars.nth(3).focus()
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_have_text("Request 4: what changed since request 3")
    own = page.locator(".diff-own .own-text")
    expect(own).to_have_text(SUMMARY)  # escaped: its <b> is text
    assert page.locator(".diff-own b").count() == 0


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [(1440, 900), (390, 844)])
def test_screenshots_of_the_timeline_and_a_diff(browser, live_server, users, rebuilt, scheme, viewport):
    width, height = viewport
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                  is_mobile=width < 500, has_touch=width < 500)
    page = context.new_page()
    try:
        sign_in(page, live_server.url, "viewer")
        page.goto(session_url(live_server.url, KEY))
        open_fold(page, "requests")
        open_fold(page, "chart")  # the page's one fragment, loaded when its panel opens
        timeline = page.locator("#request-timeline")
        timeline.scroll_into_view_if_needed()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = f"request-timeline-{width}-{scheme}"
        timeline.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        page.screenshot(path=str(SCREENSHOTS / f"{name}-page.png"))
        page.goto(session_url(live_server.url, KEY) + "recorded/4/")  # no fragment: whole at the load event
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(SCREENSHOTS / f"request-diff-{width}-{scheme}.png"), full_page=True)
    finally:
        context.close()
    copies = Path("/tmp/shots-timeline")
    if copies.is_dir():
        for shot in SCREENSHOTS.glob(f"request-*-{width}-{scheme}*.png"):
            shutil.copy(shot, copies / shot.name)
