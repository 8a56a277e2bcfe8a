"""Issue 6, the support workflow: a viewer searches, opens the message, leaves a note on it."""

import pytest
from playwright.sync_api import expect

from .data import support_session
from .helpers import has_class

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHRASE = "the courier left my suitcase at the wrong terminal"
NOTE = "Called the customer back; the suitcase is at terminal 2 lost and found."


def test_viewer_searches_opens_the_message_and_adds_a_note(live_server, login, page, project, shot):
    seq = 29  # far from the newest messages: not in the session page's default window
    session = support_session(project, PHRASE, at_seq=seq, count=150)
    login(page, "viewer")

    page.get_by_role("navigation").get_by_role("link", name="Search").click()
    page.wait_for_url("**/search/**")
    page.locator("input[name=q]").press_sequentially(PHRASE, delay=10)
    # The results for the whole phrase (htmx searched as it was typed).
    expect(page.locator("#search-results")).to_contain_text(f"for “{PHRASE}”")
    group = page.locator(".hit-session").first
    expect(group.locator("h2 a.key")).to_have_text(session.key)
    hit = group.locator(".hit a.key").first
    expect(hit).to_have_text(f"#{seq}")
    expect(page.locator(".hit .snippet").first).to_contain_text("suitcase")
    shot(page, "search-results", full_page=True)

    with page.expect_navigation():
        hit.click()
    message = page.locator(f"article#m-{seq}")
    expect(message).to_have_class(has_class("target"))
    expect(message).to_be_in_viewport()
    expect(message.locator(".text")).to_contain_text(PHRASE)
    expect(page.locator("#compact-now")).to_have_count(0)
    expect(page.get_by_role("button", name="Compact now")).to_have_count(0)

    form = page.locator(f"#m-{seq}.selected .note-form")
    expect(form).to_be_visible()
    form.locator("input[name=text]").fill(NOTE)
    with page.expect_navigation():
        form.get_by_role("button", name="Add note").click()

    page.reload()
    expect(page.locator(f"article#m-{seq} .notes")).to_contain_text(NOTE)
    expect(page.locator(f"article#m-{seq} .notes")).to_contain_text("viewer")
    expect(page.locator("#compact-now")).to_have_count(0)
    assert not page.js_errors
