"""A long word or a long query never widens a phone's page (issue 39, item 7): a 64-character token in a
hit, in its session's title and in the query, and a 1,000-character query, whose error line is bounded."""

from urllib.parse import quote

import pytest

from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOKEN = "tok_" + "9f8e7d6c5b4a3210" * 3 + "abcdefghijkl"  # 64 characters, no place to break


@pytest.fixture
def phone(page):
    page.set_viewport_size({"width": 390, "height": 844})
    return page


def width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_a_64_character_token_wraps_on_a_phone(live_server, login, phone, project, shot):
    assert len(TOKEN) == 64
    update_session(project, "long-token", {"title": f"Refund {TOKEN}"}, "test")
    append_messages(project, "long-token", [{"role": "user", "content": f"My refund id is {TOKEN} please"}], "test")
    login(phone, "viewer")
    phone.goto(f"{live_server.url}/search/?q={TOKEN}")
    assert phone.locator(".search-summary").is_visible()
    shot(phone, "search-long-token-390")
    assert width(phone) <= 390
    phone.goto(f"{live_server.url}/?q={TOKEN}")
    assert width(phone) <= 390


def test_a_1000_character_query_gives_a_bounded_error(live_server, login, phone, project):
    login(phone, "viewer")
    phone.goto(f"{live_server.url}/search/?q={quote('x' * 1000)}")
    error = phone.locator(".form-errors li").first
    assert error.is_visible()
    assert len(error.inner_text()) < 300
    assert width(phone) <= 390
