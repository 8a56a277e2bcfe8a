"""A long message on the session page: its first characters, and "show all" loads the rest in place
(htmx, under the page's Content-Security-Policy), without a reload."""

import pytest
from playwright.sync_api import expect

from sessions.db.message_sizes import TEXT_SHOWN
from sessions.ingest.append import append_messages

from .data import session_url
from .helpers import mark_page, page_was_reloaded

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_show_all_loads_the_whole_text_in_place(live_server, login, page, project):
    text = "The start of a long tool result. " + "row of data " * 5_000 + "THE LAST LINE"
    append_messages(project, "long", [{"role": "user", "content": "Fetch the report."},
                                      {"role": "assistant", "content": text}], "test")
    login(page, "admin")
    page.goto(session_url(live_server.url, "long"))
    message = page.locator("#m-2")
    expect(message).to_contain_text("The start of a long tool result.")
    expect(message).not_to_contain_text("THE LAST LINE")
    expect(message.locator(".cut")).to_contain_text(f"the first {TEXT_SHOWN} of {len(text)} characters")
    mark_page(page)

    message.locator("a.show-all").click()

    expect(message).to_contain_text("THE LAST LINE")
    expect(message.locator("a.show-all")).to_have_count(0)
    assert not page_was_reloaded(page)
