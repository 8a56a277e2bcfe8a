"""Trace a fact: a literal from a covered message typed into the session page's trace box gives the
one-sentence answer, with links to the message, the checkpoint and its diff; the badge lists the facts
the summary lost."""

import re

import pytest
from playwright.sync_api import expect

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.next_request import build_request
from sessions.models import Session
from tests.api.test_trace import ORDER_CHAT

from .data import ACTOR, session_url
from .helpers import mark_page, page_was_reloaded
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "order-support-7"


@pytest.fixture
def order(project):
    return stored(project, compacted_order)  # built once, then copied back


def compacted_order(project):
    append_messages(project, KEY, ORDER_CHAT, ACTOR)
    session = Session.objects.get(project=project, key=KEY)
    outcome = compact(session, force=True, keep_recent_tokens=1, summary="The user asked about a late parcel and a seat.")
    assert outcome.status == "completed", outcome.error
    built = build_request(project, KEY, actor=ACTOR)
    return outcome.checkpoint, built.event


def test_the_trace_box_answers_where_a_covered_literal_went(live_server, login, page, order, shot):
    checkpoint, request_event = order
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, "viewer")
    url = session_url(live_server.url, KEY)
    page.goto(url)
    mark_page(page)

    page.get_by_text("Trace a fact").click()  # the panel is folded until used
    page.fill(".trace-form input[name=q]", "W9609649")
    page.click(".trace-form button[type=submit]")

    answer = page.locator(".trace-answer")
    at = checkpoint.created_at_seq
    expect(answer).to_have_text(
        f"“W9609649” appears in #1, #2 and #4; they were covered by checkpoint {checkpoint.number} (made after #{at}), whose "
        f"summary does not mention it, so no request after #{at} carried it (the first without it: request "
        f"{request_event.pk})."
    )
    assert not page_was_reloaded(page)  # answered in place, by the fragment
    assert page.url == url + "?trace=W9609649"  # and going back to it shows it again
    rows = page.locator(".trace-rows tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first.locator("mark")).to_have_text("W9609649")
    expect(rows.first).to_contain_text("does not carry it")
    shot(page, "trace-answer")

    # The message.
    page.locator(".trace-rows a.trace-message").first.click()
    expect(page).to_have_url(re.compile(r"\?seq=1#m-1$"))
    expect(page.locator("#m-1")).to_contain_text("W9609649")

    # The checkpoint: the model input as of it.
    page.go_back()
    expect(answer).to_contain_text("whose summary does not mention it")
    page.click(".trace-links a.trace-checkpoint")
    expect(page).to_have_url(re.compile(rf"\?as_of_checkpoint={checkpoint.pk}$"))
    expect(page.locator(".as-of-banner")).to_contain_text(f"checkpoint {checkpoint.number}")

    # Its diff, with the facts the summary lost.
    page.go_back()
    page.click(".trace-links a.trace-diff")
    expect(page).to_have_url(re.compile(rf"/checkpoints/{checkpoint.pk}/$"))
    lost = page.locator(".diff-lost")
    expect(lost).to_contain_text(f"loses {checkpoint.facts_lost}")
    expect(lost.locator("code", has_text="W9609649")).to_be_visible()
    lost.scroll_into_view_if_needed()
    shot(page, "diff-lost-facts")

    # The first request that no longer carried it.
    page.go_back()
    page.click(".trace-links a.trace-request")
    expect(page).to_have_url(re.compile(rf"/requests/{request_event.pk}/$"))
    assert not page.js_errors


def test_the_badge_opens_the_list_of_facts_not_in_the_summary(live_server, login, page, order, shot):
    checkpoint, _ = order
    page.set_viewport_size({"width": 1440, "height": 900})
    login(page, "viewer")
    page.goto(session_url(live_server.url, KEY))

    badge = page.locator("details.lost-facts")
    expect(badge.locator("summary")).to_have_text(f"{checkpoint.facts_lost} facts not in the summary")
    items = badge.locator("li")
    expect(items.first).not_to_be_visible()
    badge.locator("summary").click()
    expect(items).to_have_count(checkpoint.facts_lost)
    expect(items.first).to_be_visible()
    badge.scroll_into_view_if_needed()
    shot(page, "lost-facts-badge")

    fact = items.filter(has=page.locator("code", has_text="UA123"))
    fact.locator("a", has_text="#5").click()
    expect(page).to_have_url(re.compile(r"\?seq=5#m-5$"))
    expect(page.locator("#m-5")).to_contain_text("UA123")
    assert not page.js_errors
