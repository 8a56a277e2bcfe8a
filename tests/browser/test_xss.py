"""Message text from applications is shown as text: it never runs as script or HTML."""

import pytest
from playwright.sync_api import expect

from .data import XSS, session_url, xss_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_hostile_message_text_is_shown_literally(live_server, login, page, project, shot):
    session = xss_session(project)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login(page, "admin")

    page.goto(session_url(live_server.url, session.key))
    page.wait_for_timeout(1500)
    assert dialogs == []
    assert page.locator("#m-1 .text").inner_text() == XSS
    page.locator("#m-1 details.attributes > summary").click()  # attributes are folded
    assert page.locator("#m-1 table.attributes td").inner_text() == XSS
    assert page.locator("#m-2 .tool-call pre.arguments").inner_text() == XSS
    assert page.locator("#m-3 .text").inner_text() == XSS
    assert page.locator(".model-input .entry[data-seq='1'] .text").inner_text() == XSS
    expect(page.locator("h1")).to_have_text(XSS)
    # Nothing of it became markup.
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("main script").count() == 0
    shot(page, "xss-session", full_page=True)

    # The sessions list (title) and the search results (a snippet with highlighted terms).
    page.goto(live_server.url + "/")
    page.wait_for_timeout(500)
    expect(page.locator("table.sessions")).to_contain_text(XSS)
    page.goto(live_server.url + "/search/?q=onerror+alert")
    page.wait_for_timeout(1000)
    expect(page.locator(".hit").first).to_be_visible()
    assert XSS in page.locator(".hit .snippet").first.inner_text()
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("main script").count() == 0
    assert dialogs == []
