"""A session rebuilt from a real request log, in the browser: the raw log marks the message the
application itself dropped, on a wide and a phone screen, light and dark, within the screen."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from sessions.ingest.importers import import_path

from .conftest import sign_in
from .stored_data import stored

LOG = Path(__file__).resolve().parent.parent / "data" / "request-logs" / "interactions_20251103_025309.jsonl"


@pytest.mark.parametrize("width,height,scheme", [(1440, 900, "light"), (1440, 900, "dark"), (390, 844, "light"),
                                                 (390, 844, "dark")])
def test_what_the_application_dropped_shows_in_the_raw_log(live_server, browser, users, project, shot, width,
                                                           height, scheme):
    report = stored(project, import_path, LOG)  # imported once, then copied back
    assert report.error is None
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                  is_mobile=width < 700, has_touch=width < 700)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        sign_in(page, live_server.url, "viewer")
        page.goto(f"{live_server.url}/p/default/s/{report.keys[0]}/?seq=8#m-8")
        dropped = page.locator("article#m-8")
        expect(dropped.locator(".badge.app-dropped")).to_have_text("dropped by the application · request 7")
        expect(dropped.locator(".explain")).to_contain_text("Last sent in request 6; request 7 was the first without it")
        dropped.scroll_into_view_if_needed()
        shot(page, f"application-dropped-{width}-{scheme}")
        # The marked message fits the screen. (A long session key in the page head may still push the page
        # a few pixels wider on a phone, as for any imported file with a long name: not this test's concern.)
        box = dropped.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
        badge = dropped.locator(".badge.app-dropped").bounding_box()
        assert badge["x"] + badge["width"] <= width + 1
        assert not errors
    finally:
        context.close()
