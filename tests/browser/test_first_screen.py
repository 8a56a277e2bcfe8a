"""The conversation on the first screen (issue 39, item 4): on the session page the meter, the tabs and the
first messages of both columns show without scrolling, at 1440×900 and on a phone (where the columns are
tabs: the first message of the one shown); metadata, Trace, What if…, the size chart and As of… fold into
one bar, each remembered open or folded per user; the diff page puts what was lost and the summary
before the covered messages."""

import pytest

from sessions.models import Checkpoint, Session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SESSION = "/p/default/s/airline-support-42/"


def top(page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box["y"]


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_meter_the_tabs_and_the_first_messages_are_on_the_first_screen(live_server, login, page, demo, shot,
                                                                             width, height):
    page.set_viewport_size({"width": width, "height": height})
    login(page, "viewer")
    page.goto(live_server.url + SESSION)
    shot(page, f"session-first-screen-{width}")
    first_raw = top(page, "#raw-items .msg")
    assert top(page, "#session-stats .meter-box") < height
    assert first_raw + 40 < height, f"the first message of the raw log starts at y={first_raw}"
    if width > 700:
        assert top(page, ".rail-nav") < height
        first_input = top(page, "#model-input-column .entry, #model-input-column .msg")
        assert first_input + 40 < height, f"the first entry of the model input starts at y={first_input}"
    else:
        assert top(page, "[role=tablist] [role=tab]") < height
        page.click("#side-rail-tab")
        first_input = top(page, "#model-input-column .entry, #model-input-column .msg")
        assert first_input + 40 < height, f"on its tab, the model input's first entry starts at y={first_input}"
    # Every panel of the fold bar is folded until opened, its button in one bar above the columns.
    for fold in ("metadata", "trace", "what-if", "chart", "as-of"):
        panel = page.locator(f"#fold-bar details[data-fold={fold}]")
        assert panel.count() == 1 and panel.get_attribute("open") is None, fold
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_a_panel_left_open_stays_open_for_that_user_only(live_server, login, page, browser, demo):
    login(page, "viewer")
    page.goto(live_server.url + SESSION)
    page.wait_for_load_state("load")
    with page.expect_response(lambda r: "/preferences/panels/" in r.url and r.status == 204):
        page.click("#fold-bar details[data-fold=chart] > summary")
    page.locator(".chart-box svg").first.wait_for()  # the chart loads once opened
    with page.expect_response(lambda r: "/preferences/panels/" in r.url and r.status == 204):
        page.click("#fold-bar details[data-fold=metadata] > summary")

    other = (Session.objects.filter(project__name="default").exclude(key="airline-support-42")
             .order_by("-message_count", "key").first())
    page.goto(live_server.url + other.get_absolute_url())
    assert page.locator("#fold-bar details[data-fold=chart]").get_attribute("open") is not None
    page.locator(".chart-box svg").first.wait_for()
    page.goto(live_server.url + SESSION)
    assert page.locator("#fold-bar details[data-fold=metadata]").get_attribute("open") is not None
    assert page.locator("#metadata .metadata").is_visible()

    admin = browser.new_page()
    try:
        login(admin, "admin")
        admin.goto(live_server.url + SESSION)
        assert admin.locator("#fold-bar details[data-fold=chart]").get_attribute("open") is None
    finally:
        admin.close()

    with page.expect_response(lambda r: "/preferences/panels/" in r.url and r.status == 204):
        page.click("#fold-bar details[data-fold=metadata] > summary")
    page.reload()
    assert page.locator("#fold-bar details[data-fold=metadata]").get_attribute("open") is None


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_diff_page_shows_what_was_lost_and_the_summary_first(live_server, login, page, demo, shot, width, height):
    page.set_viewport_size({"width": width, "height": height})
    login(page, "viewer")
    checkpoint = Checkpoint.objects.filter(session__key="airline-support-42").order_by("pk").first()
    page.goto(live_server.url + checkpoint.session.url("checkpoint_diff", checkpoint.pk))
    shot(page, f"diff-first-screen-{width}")
    covered, summary = page.locator(".diff-left").bounding_box(), page.locator(".diff-summary .entry.summary").bounding_box()
    if width > 1000:  # three columns: the summary's is the first, on the left
        assert summary["x"] < covered["x"] and summary["y"] < height
    else:  # stacked: the summary and what was lost come before the covered messages
        assert summary["y"] < covered["y"]
    if page.locator("#lost-title").count():
        assert top(page, "#lost-title") < height
