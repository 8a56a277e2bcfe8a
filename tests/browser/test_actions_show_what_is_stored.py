"""Every action on the session page leaves the page showing what is stored (issue 39, item 1): hiding a
message from the model, or including it again, from any URL of the page, a copied `?seq=N` link and the
URL an earlier toggle left included, shows the new state at once, in the raw log and the input column."""

import pytest
from playwright.sync_api import expect

from sessions.models import Message

from .data import session_url
from .helpers import has_class

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY, SEQ = "airline-support-42", 20  # an included message of the demo session


def input_count(page) -> str:
    return page.locator("#input-title").inner_text()


def button(page, name: str):
    """The message's toggle, shown once the message is selected (a click on its header)."""
    message = page.locator(f"#m-{SEQ}")
    message.locator("header .role").click()
    return message.get_by_role("button", name=name)


@pytest.mark.parametrize("where", ["?seq=20", "?seq=20#m-20", ""])
def test_hide_and_include_show_the_stored_state_from_any_url(live_server, login, page, demo, where):
    login(page, "admin")
    page.goto(session_url(live_server.url, KEY) + where)
    before = input_count(page)
    button(page, "Hide from the model").click()
    expect(page.locator(f"#m-{SEQ}")).to_have_class(has_class("code-excluded_flag"))
    expect(button(page, "Include in the model input again")).to_be_visible()
    assert Message.objects.get(session__key=KEY, seq=SEQ).include_in_messages is False
    assert input_count(page) != before  # the input column counts one message fewer

    button(page, "Include in the model input again").click()
    expect(page.locator(f"#m-{SEQ}")).not_to_have_class(has_class("code-excluded_flag"))
    expect(button(page, "Hide from the model")).to_be_visible()
    assert Message.objects.get(session__key=KEY, seq=SEQ).include_in_messages is True
    assert input_count(page) == before
    assert not page.js_errors
