"""The raw log column: explaining a hidden message, following tool calls, loading in windows."""

import pytest
from playwright.sync_api import expect

from .data import long_session, session_url, tool_jumps
from .helpers import has_class, mark_page, page_was_reloaded, raw_seqs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_selecting_a_hidden_message_explains_why(live_server, login, page, demo):
    login(page, "admin")
    # airline-support-42 #26 is a user message the support app hid; travel-assistant-7 #13 is a hidden
    # assistant tool call.
    for key, seq, click_on in [("airline-support-42", 26, None), ("travel-assistant-7", 13, "header .role")]:
        page.goto(session_url(live_server.url, key))
        message = page.locator(f"#m-{seq}")
        expect(message).to_have_class(has_class("code-excluded_flag"))
        assert page.locator(".msg.code-excluded_flag").count() == 1
        explain = message.locator(".explain")
        expect(explain).to_be_hidden()
        # A click on the message itself (for the tool-call message, on its header: a click inside the
        # arguments' <pre> is left alone so their text can be selected).
        (message.locator(click_on) if click_on else message).click()
        expect(message).to_have_class(has_class("selected"))
        expect(explain).to_be_visible()
        expect(explain).to_contain_text("excluded_flag")
        expect(explain).to_contain_text("include_in_messages is false")
    assert not page.js_errors


def test_follow_a_tool_call_to_its_result_and_back(live_server, login, page, project):
    session = tool_jumps(project)
    login(page, "admin")
    page.goto(session_url(live_server.url, session.key))
    call_seq, result_seq = 2, 7  # the fifth parallel call of #2 is answered by #7
    call_message, result = page.locator(f"#m-{call_seq}"), page.locator(f"#m-{result_seq}")

    link = call_message.locator(".tool-call[data-call-id='call_w_4'] a[data-jump]")
    expect(link).to_have_text(f"→ result #{result_seq}")
    link.evaluate("a => a.scrollIntoView({block: 'start'})")
    expect(result).not_to_be_in_viewport()  # precondition: following the link has to scroll
    link.click()
    expect(result).to_be_in_viewport()
    expect(result).to_have_class(has_class("selected"))

    back = result.locator(".tool-link a[data-jump]")
    expect(back).to_have_text(f"← call in #{call_seq}")
    back.evaluate("a => a.scrollIntoView({block: 'start'})")
    expect(call_message).not_to_be_in_viewport()  # precondition: the call is out of sight
    back.click()
    expect(call_message).to_be_in_viewport()
    expect(call_message).to_have_class(has_class("selected"))
    assert not page.js_errors


def test_long_session_loads_earlier_messages_in_windows(live_server, login, page, project, shot):
    session = long_session(project, count=500)
    login(page, "admin")
    page.goto(session_url(live_server.url, session.key))
    first = raw_seqs(page)
    assert 40 <= len(first) <= 100, f"{len(first)} raw messages on the first screen"
    assert first == list(range(first[0], 501)), "the first window is the newest messages, in order"
    mark_page(page)

    button = page.locator(".raw-log button.more-earlier")
    expect(button).to_contain_text(f"Load earlier messages (before #{first[0]})")
    button.click()
    expect(page.locator(f"#m-{first[0] - 1}")).to_be_attached()
    more = raw_seqs(page)
    assert len(more) > len(first)
    assert more == list(range(more[0], 501)), "older messages are added above, in order, without duplicates"
    assert not page_was_reloaded(page)
    # Another window is still there to load.
    expect(page.locator(".raw-log button.more-earlier")).to_contain_text(f"before #{more[0]}")
    assert not page.js_errors
