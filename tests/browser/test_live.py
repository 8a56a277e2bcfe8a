"""New messages appear on an open session page without a reload (the htmx poller)."""

import json
import urllib.request

import pytest
from playwright.sync_api import expect

from sessions.access.api_keys import create_api_key

from .data import session_url, small_session
from .helpers import mark_page, page_was_reloaded

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def post_messages(base_url: str, secret: str, key: str, messages: list[dict]) -> dict:
    request = urllib.request.Request(
        f"{base_url}/api/v1/sessions/{key}/messages",
        data=json.dumps({"messages": messages}).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        return json.load(response)


def test_appended_message_appears_without_reload(live_server, login, page, project):
    session = small_session(project)
    _, secret = create_api_key(project, "browser-test-app")
    login(page, "admin")
    page.goto(session_url(live_server.url, session.key))
    count = page.locator("#session-stats strong").first
    expect(count).to_have_text("3")
    expect(page.locator("#m-4")).to_have_count(0)
    mark_page(page)

    text = "The 9:40 to Porto runs on time from platform 4."
    post_messages(live_server.url, secret, session.key, [{"role": "assistant", "content": text}])

    new = page.locator("article#m-4")
    expect(new).to_be_attached(timeout=10_000)
    expect(new.locator(".text")).to_have_text(text)
    expect(count).to_have_text("4")
    # It also reached the model input column.
    expect(page.locator(".model-input .entry[data-seq='4']")).to_have_count(1)
    assert not page_was_reloaded(page)
    assert not page.js_errors
