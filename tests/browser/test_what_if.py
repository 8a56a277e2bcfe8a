"""The What if… panel on a real transcript (tau-bench airline, tests/data): a preview with the session's
settings says in words why nothing would be covered; lower keep_recent_tokens and the raw log marks what
would be covered and the projected model input is shown; then compact with those settings, and save them."""

import re

import pytest
from playwright.sync_api import expect

from sessions.ingest.append import append_messages
from sessions.ingest.session_store import update_session
from sessions.models import Checkpoint, Session
from tests.transcripts import openai_conversations, to_ctxweb

from .data import session_url
from .helpers import has_class
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "tau-airline-0"


@pytest.fixture
def airline(project) -> Session:
    """The first tau-bench airline conversation, with the settings of issue 17: far under max_tokens,
    and a keep_recent_tokens larger than the whole session. Built once, then copied back."""
    return stored(project, tau_airline)


def tau_airline(project) -> Session:
    label, messages = next((label, m) for label, m in openai_conversations() if label == "tau-bench-gpt-4o-airline-0")
    update_session(project, KEY, {"title": "Airline support (tau-bench)",
                                  "compaction": {"max_tokens": 100_000, "keep_recent_tokens": 20_000, "auto": False}},
                   "browser-test")
    append_messages(project, KEY, [to_ctxweb(m) for m in messages], "browser-test")
    return Session.objects.get(project=project, key=KEY)


def covered_seqs(page) -> list[int]:
    return page.eval_on_selector_all(".raw-log .msg.what-if-covered", "els => els.map(e => Number(e.dataset.seq))")


def test_what_if_preview_compact_and_save(live_server, login, page, airline, shot):
    login(page, "admin")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(session_url(live_server.url, KEY))
    panel = page.locator("#what-if")
    expect(panel.get_by_label("max_tokens", exact=True)).not_to_be_visible()  # folded until used
    panel.locator("summary").click()
    expect(panel.get_by_label("max_tokens", exact=True)).to_have_value("100000")
    expect(panel.get_by_label("keep_recent_tokens", exact=True)).to_have_value("20000")
    expect(panel.get_by_label("summarizer")).to_have_value("extractive")

    # 1. The session's own settings: nothing would be covered, and the page says why.
    panel.get_by_role("button", name="Preview").click()
    answer = page.locator("#what-if-result .what-if-answer")
    expect(answer).to_contain_text("Would not compact (under_threshold)")
    expect(answer).to_contain_text("not over max_tokens 100,000")
    expect(answer).to_contain_text("keep_recent_tokens 20,000 keeps every turn of this")
    assert covered_seqs(page) == []
    panel.scroll_into_view_if_needed()
    shot(page, "what-if-nothing-covered")

    # 2. Lower keep_recent_tokens, even under max_tokens: the covered range is marked in the raw log.
    panel.get_by_label("keep_recent_tokens", exact=True).fill("500")
    panel.get_by_label("even under max_tokens").check()
    panel.get_by_role("button", name="Preview").click()
    expect(answer).to_contain_text("Would compact.")
    result = page.locator("#what-if-result")
    first, last = int(result.get_attribute("data-first-seq")), int(result.get_attribute("data-last-seq"))
    assert first == 1 and last < airline.message_count
    expect(page.locator(f"#m-{first + 1}")).to_have_class(has_class("what-if-covered"))
    system = set(airline.messages.filter(role="system").values_list("seq", flat=True))
    assert covered_seqs(page) == [s for s in range(first, last + 1) if s not in system]
    expect(page.locator(f"#m-{last + 1}")).not_to_have_class(has_class("what-if-covered"))
    expect(page.locator(f"#m-{first + 1} .what-if-badge")).to_have_text("would be covered")
    expect(page.locator(f"#m-{last + 1} .what-if-badge")).to_have_count(0)
    total = page.locator("#what-if-result .what-if-total")
    expect(total).to_have_text(re.compile(r"^\d+ tokens$"))
    projected = int(total.inner_text().split()[0])
    assert projected < airline.input_tokens
    expect(page.locator("#what-if-result .what-if-input")).to_contain_text("new checkpoint's summary covering")
    shot(page, "what-if-preview")
    page.emulate_media(color_scheme="dark")
    shot(page, "what-if-preview-dark")
    page.emulate_media(color_scheme="light")
    page.locator(f"#m-{first + 1}").scroll_into_view_if_needed()
    shot(page, "what-if-raw-log-marked")
    assert Checkpoint.objects.filter(session=airline).count() == 0, "a preview stores nothing"

    # 3. Compact with these settings: the checkpoint covers what the preview said.
    panel.get_by_role("button", name="Compact with these settings").click()
    expect(page.locator(".flash")).to_contain_text(f"covers messages #{first}–#{last}")
    expect(panel.get_by_label("max_tokens", exact=True)).to_be_visible()  # still open after the reload
    checkpoint = Checkpoint.objects.get(session=airline)
    assert (checkpoint.first_seq, checkpoint.last_seq, checkpoint.tokens_after) == (first, last, projected)
    airline.refresh_from_db()
    assert airline.keep_recent_tokens == 20_000, "compacting with other settings does not save them"

    # 4. Save as this session's settings.
    panel.get_by_label("max_tokens", exact=True).fill("3000")
    panel.get_by_label("keep_recent_tokens", exact=True).fill("800")
    panel.get_by_role("button", name="Save as this session's settings").click()
    expect(page.locator(".flash")).to_contain_text("Saved: this session now compacts above max_tokens 3,000")
    expect(panel.get_by_label("max_tokens", exact=True)).to_have_value("3000")
    expect(panel.get_by_label("keep_recent_tokens", exact=True)).to_have_value("800")
    airline.refresh_from_db()
    assert (airline.max_tokens, airline.keep_recent_tokens) == (3000, 800)
    expect(page.locator(".meter-text")).to_contain_text("/ 3000 tokens")
    shot(page, "what-if-saved")
    assert page.js_errors == []


def test_a_viewer_previews_but_cannot_compact_or_save(live_server, login, page, airline, shot):
    login(page, "viewer")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(session_url(live_server.url, KEY))
    panel = page.locator("#what-if")
    panel.locator("summary").focus()  # folded until used; the keyboard opens it
    page.keyboard.press("Enter")
    expect(panel.get_by_role("button", name="Compact with these settings")).to_have_count(0)
    expect(panel.get_by_role("button", name="Save as this session's settings")).to_have_count(0)
    panel.get_by_label("keep_recent_tokens", exact=True).fill("-3")
    panel.get_by_label("max_tokens", exact=True).fill("100")
    # The browser's own check stops a negative number; a bad value sent anyway gets the server's words.
    page.evaluate("document.querySelector('#what-if-form input[name=keep_recent_tokens]').removeAttribute('min')")
    panel.get_by_role("button", name="Preview").click()
    expect(page.locator("#what-if-result [role=alert]")).to_contain_text("keep_recent_tokens")
    panel.get_by_label("keep_recent_tokens", exact=True).fill("300")
    panel.get_by_role("button", name="Preview").click()
    expect(page.locator("#what-if-result .what-if-answer")).to_contain_text("Would compact.")
    panel.scroll_into_view_if_needed()
    shot(page, "what-if-phone-viewer")
    page.emulate_media(color_scheme="dark")
    page.locator(".raw-log .msg.what-if-covered").first.scroll_into_view_if_needed()
    shot(page, "what-if-phone-raw-log-dark")
    assert Checkpoint.objects.filter(session=airline).count() == 0
    assert page.js_errors == []
