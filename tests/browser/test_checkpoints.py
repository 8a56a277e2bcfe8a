"""Checkpoints on the session page: highlighting what each covers, the compaction diff, "as of"."""

import pytest
from playwright.sync_api import expect

from sessions.models import Checkpoint, Session

from .data import session_url
from .helpers import has_class, open_fold, raw_seqs, show_panel

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AIRLINE = "airline-support-42"

# Every element carrying class "highlight": raw messages as "m<seq>", the element passed in as
# "hovered", anything else by its tag and classes (so an unexpected one shows up in the assertion).
HIGHLIGHTED_JS = """(hovered) => Array.from(document.querySelectorAll('.highlight')).map(e =>
    e === hovered ? 'hovered'
    : e.matches('.raw-log .msg[data-seq]') ? 'm' + e.dataset.seq
    : e.tagName.toLowerCase() + '.' + Array.from(e.classList).join('.'))"""


@pytest.fixture
def airline(demo):
    return Session.objects.get(project=demo, key=AIRLINE)


def covers(locator) -> tuple[int, int]:
    lo, hi = locator.get_attribute("data-covers").split("-")
    return int(lo), int(hi)


def highlighted(locator) -> list[str]:
    """What carries class "highlight" now, with `locator`'s element reported as "hovered"."""
    return locator.evaluate(HIGHLIGHTED_JS)


def expected(seqs, lo, hi, system=()) -> list[str]:
    """The hovered element and the raw messages lo..hi, but not system messages: instructions are
    never covered, even inside a checkpoint's range."""
    return sorted(["hovered"] + [f"m{s}" for s in seqs if lo <= s <= hi and s not in system])


def test_checkpoint_hover_highlights_exactly_the_covered_range(live_server, login, page, airline, shot):
    login(page, "admin")
    page.goto(live_server.url + "/")
    expect(page.locator("table.sessions")).to_contain_text(AIRLINE)
    shot(page, "sessions-list", full_page=True)

    page.goto(session_url(live_server.url, AIRLINE))
    checkpoints = list(Checkpoint.objects.filter(session=airline).order_by("last_seq"))
    assert len(checkpoints) == 2
    seqs = raw_seqs(page)
    assert seqs == list(range(1, airline.message_count + 1)), "the small demo session should be on one page"
    system = set(airline.messages.filter(role="system").values_list("seq", flat=True))
    assert system and min(system) <= checkpoints[0].last_seq, "the demo stores a system message in the first range"
    expect(page.locator(".checkpoints [data-covers]")).to_have_count(2)
    open_fold(page, "chart")
    expect(page.locator(".chart-box")).not_to_contain_text("Loading")  # the chart fragment arrived
    shot(page, "session-checkpoints", full_page=True)

    # 1. The checkpoint summary in the model input covers #1..#N (N: last seq of the latest checkpoint).
    summary = page.locator(".model-input .entry.summary")
    expect(summary).to_have_count(1)
    lo, hi = covers(summary)
    assert (lo, hi) == (1, checkpoints[-1].last_seq)
    assert not highlighted(summary)
    summary.hover()
    assert sorted(highlighted(summary)) == expected(seqs, 1, hi, system)
    assert not any(f"m{s}" in highlighted(summary) for s in system)
    shot(page, "checkpoint-range-highlighted")

    # 2. Each checkpoint of the Checkpoints list highlights exactly its own range.
    show_panel(page, "Checkpoints")
    for index, checkpoint in enumerate(checkpoints):
        item = page.locator(".checkpoints [data-covers]").nth(index)
        assert covers(item) == (checkpoint.first_seq, checkpoint.last_seq)
        item.hover()
        assert sorted(highlighted(item)) == expected(seqs, checkpoint.first_seq, checkpoint.last_seq, system), (
            f"hovering checkpoint {checkpoint.pk} (#{checkpoint.first_seq}-#{checkpoint.last_seq})")
    shot(page, "checkpoint-list-range-highlighted", full_page=True)  # the last one, still hovered

    # 3. The reverse: hovering a covered raw message highlights the summary that replaced it (and its
    # checkpoint in the list, not the other one).
    first, second = checkpoints
    message = page.locator(f"#m-{second.first_seq + 1}")
    expect(message).to_have_attribute("data-checkpoint", str(second.pk))
    message.hover()
    expect(summary).to_have_class(has_class("highlight"))
    expect(message).to_have_class(has_class("highlight"))
    expect(page.locator(f".checkpoints [data-checkpoint='{second.pk}']")).to_have_class(has_class("highlight"))
    expect(page.locator(f".checkpoints [data-checkpoint='{first.pk}']")).not_to_have_class(has_class("highlight"))
    assert not page.js_errors


def test_compaction_diff_from_the_checkpoint_list(live_server, login, page, airline, shot):
    login(page, "admin")
    page.goto(session_url(live_server.url, AIRLINE))
    checkpoint = Checkpoint.objects.filter(session=airline).order_by("last_seq").last()
    item = page.locator(f".checkpoints [data-checkpoint='{checkpoint.pk}']")
    show_panel(page, "Checkpoints")
    with page.expect_navigation():
        item.get_by_role("link", name="compaction diff").click()
    assert f"/checkpoints/{checkpoint.pk}/" in page.url
    headings = page.locator("h2")
    expect(headings.filter(has_text="What left the input")).to_have_count(1)
    expect(headings.filter(has_text="What replaced it")).to_have_count(1)
    expect(headings.filter(has_text="What stayed")).to_have_count(1)
    # What left is the checkpoint's own range; the summary replacing it covers #1..last_seq.
    left = page.locator(".diff-left article[class*='role-'] .permalink")
    expect(left.first).to_have_text(f"#{checkpoint.first_seq}")
    expect(left.last).to_have_text(f"#{checkpoint.last_seq}")
    expect(page.locator(".diff-summary")).to_contain_text(f"#1–#{checkpoint.last_seq}")
    expect(page.locator(".diff-stayed .permalink").first).to_have_text(f"#{checkpoint.last_seq + 1}")
    shot(page, "compaction-diff", full_page=True)


def test_model_input_as_of_a_checkpoint(live_server, login, page, airline):
    login(page, "admin")
    page.goto(session_url(live_server.url, AIRLINE))
    first = Checkpoint.objects.filter(session=airline).order_by("last_seq").first()
    expect(page.locator("#input-title")).to_contain_text("as built now")
    open_fold(page, "as-of")
    page.select_option("select[name=as_of_checkpoint]", str(first.pk))
    with page.expect_navigation():
        page.locator("form.as-of button[type=submit]").click()
    expect(page.locator("#input-title")).to_contain_text(f"as of #{first.created_at_seq}")
    # As of that moment the model input was built on that checkpoint.
    summary = page.locator(".model-input .entry.summary")
    expect(summary).to_have_attribute("data-checkpoint", str(first.pk))
    expect(summary).to_have_attribute("data-covers", f"1-{first.last_seq}")


def test_on_a_phone_the_diff_page_shows_what_was_lost_and_the_summary_first(live_server, login, page, airline, shot):
    """Issue 39, item 4: the facts a summary lost, and the summary, come before the covered messages;
    on a phone they were at y=10,353, after every covered message."""
    checkpoint = Checkpoint.objects.filter(session=airline).order_by("last_seq").last()
    page.set_viewport_size({"width": 390, "height": 844})
    login(page, "admin")
    page.goto(f"{session_url(live_server.url, AIRLINE)}checkpoints/{checkpoint.pk}/")
    lost = page.locator("#lost-title").bounding_box()
    summary = page.locator(".diff-summary article.summary").bounding_box()
    covered = page.locator(".diff-left").bounding_box()
    assert lost["y"] < 844 and lost["y"] < summary["y"] < covered["y"], (lost, summary, covered)
    shot(page, "compaction-diff-390")
