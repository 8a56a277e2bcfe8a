"""Issue 17: one click from a message to its answer. The "covered by checkpoint N" badge opens the summary
in the model input (which stays in view while the raw log scrolls), the summary expands in place, the
diff is one more click, a "hidden" badge opens the event that hid it, and the go-to box and j/k move
through the log."""

import re

import pytest
from playwright.sync_api import expect

from sessions.context.checkpoints import create_imported_checkpoint
from sessions.ingest.append import append_messages
from sessions.ingest.message_edits import update_message
from sessions.models import Session

from .data import session_url
from .helpers import has_class
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "navigate-58"
COUNT = 58


def long_session(project) -> Session:
    """58 messages, each long enough that the raw log is many screens tall; two checkpoints (#1-#20 with a
    short summary, then #21-#30 with one far longer than its 22em box); #40 hidden by a person. Built
    once, then copied back."""
    return stored(project, build_long_session)


def build_long_session(project) -> Session:
    messages = []
    for i in range(1, COUNT + 1):
        role = "user" if i % 2 else "assistant"
        body = "\n".join(f"line {n} of message {i}: the customer asks about booking {1000 + i}" for n in range(8))
        messages.append({"role": role, "content": f"Message {i}.\n{body}"})
    append_messages(project, KEY, messages, "browser-test")
    session = Session.objects.get(project=project, key=KEY)
    create_imported_checkpoint(session, 20, "The customer rebooked flight HAT123 to May 24.")
    long_summary = "\n".join(f"Point {n}: booking {1000 + n} was discussed and settled." for n in range(1, 120))
    create_imported_checkpoint(session, 30, long_summary)
    update_message(project, KEY, 40, {"include_in_messages": False}, "alice")
    return session


def in_viewport(page, locator) -> bool:
    box = locator.bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] < height and box["y"] + box["height"] > 0


def test_from_a_covered_message_to_its_summary_and_diff(live_server, login, page, project, shot):
    session = long_session(project)
    numbers = list(session.checkpoints.order_by("last_seq").values_list("number", flat=True))
    assert numbers == [1, 2]
    login(page, "admin")
    page.goto(session_url(live_server.url, KEY) + "?seq=12")
    message = page.locator("#m-12")
    expect(message).to_have_class(has_class("target"))
    badge = message.get_by_role("link", name="covered by checkpoint 1")
    expect(badge).to_be_visible()
    shot(page, "navigate-target-12")

    # The badge brings the summary (of the latest checkpoint, which carries #1-#30) into view in the
    # model-input column, highlighted, without leaving the page.
    badge.click()
    summary = page.locator("#model-input-column #input-summary")
    expect(summary).to_be_visible()
    expect(summary).to_have_class(has_class("highlight"))
    assert in_viewport(page, summary)
    assert page.url.endswith("?seq=12") or "#m-12" in page.url  # still the session page
    shot(page, "navigate-badge-to-summary")

    # The summary is longer than its box: "show all" expands it in place, and collapses it again.
    expect(summary.get_by_role("button", name="Show the whole summary")).to_be_visible()
    toggle = summary.locator("button.expand-summary")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    text = summary.locator(".text")
    clipped = text.evaluate("el => el.clientHeight")
    assert text.evaluate("el => el.scrollHeight") > clipped + 50
    toggle.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    assert text.evaluate("el => el.clientHeight") > clipped + 50
    assert text.evaluate("el => el.scrollHeight <= el.clientHeight + 1")
    shot(page, "navigate-summary-expanded")
    expect(toggle).to_have_text("Show less of the summary")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")

    # The explanation names the diff of checkpoint 1: one click to it.
    expect(message).to_have_class(has_class("selected"))  # the message asked for shows its explanation
    diff = message.get_by_role("link", name="what checkpoint 1 changed")
    expect(diff).to_be_visible()
    diff.click()
    expect(page).to_have_url(re.compile(r"/checkpoints/\d+/"))
    expect(page.locator("h1")).to_have_text("Compaction diff: checkpoint 1")
    shot(page, "navigate-diff-checkpoint-1")


def test_hidden_badge_opens_the_event_that_hid_it(live_server, login, page, project, shot):
    long_session(project)
    login(page, "admin")
    page.goto(session_url(live_server.url, KEY) + "?seq=40")
    badge = page.locator("#m-40 header").get_by_role("link", name="hidden", exact=True)
    expect(badge).to_be_visible()
    badge.click()
    event = page.locator("#events-panel .event.type-message_updated").first
    expect(event).to_be_visible()
    expect(event).to_contain_text("#40")
    assert in_viewport(page, event)
    assert event.evaluate("el => el === document.activeElement")
    shot(page, "navigate-hidden-to-event")


def test_the_model_input_stays_in_view_and_follows_the_selection(live_server, login, page, project, shot):
    long_session(project)
    login(page, "admin")
    page.goto(session_url(live_server.url, KEY))
    rail = page.locator("#side-rail")
    raw_height = page.locator("#raw-log-column").evaluate("el => el.offsetHeight")
    assert raw_height > 4 * page.viewport_size["height"], "the raw log should be many screens tall"

    # Scrolled far down the raw log, the model-input column is still on screen.
    page.evaluate("document.getElementById('m-50').scrollIntoView({block: 'start'})")
    assert page.evaluate("window.scrollY") > 4000
    assert in_viewport(page, page.locator("#model-input-column h2"))
    assert in_viewport(page, rail)
    shot(page, "navigate-rail-sticky")

    # The checkpoints are one click away, without scrolling past the log.
    page.locator(".rail-nav").get_by_role("link", name=re.compile("Checkpoints")).click()
    checkpoints = page.locator("#checkpoints-panel")
    expect(checkpoints.get_by_role("heading", name=re.compile("Checkpoints"))).to_be_visible()
    expect(checkpoints.locator(".checkpoint")).to_have_count(2)
    expect(checkpoints.locator(".checkpoint").first).to_contain_text("Checkpoint 1")
    assert in_viewport(page, checkpoints.locator(".checkpoint").first)
    shot(page, "navigate-checkpoints-panel")

    # Clicking a raw message in the input scrolls its counterpart into view inside the column.
    page.locator("#m-45 .text").first.click()
    counterpart = page.locator("#input-m-45")
    expect(counterpart).to_have_class(has_class("counterpart"))
    expect(page.locator("#model-input-column")).to_be_visible()
    assert in_viewport(page, counterpart)


def test_go_to_box_and_j_k_keys(live_server, login, page, project, shot):
    long_session(project)
    login(page, "admin")
    page.goto(session_url(live_server.url, KEY))
    box = page.get_by_label("Go to #")
    box.fill("33")
    box.press("Enter")
    selected = page.locator("#m-33")
    expect(selected).to_have_class(has_class("selected"))
    assert in_viewport(page, selected)
    assert page.url.endswith("#m-33")
    # 33 is in the input: its counterpart comes into view in the model-input column.
    expect(page.locator("#input-m-33")).to_have_class(has_class("counterpart"))

    # j/k move the selection from there (typing in the box does not).
    page.locator("#m-33").focus()
    page.keyboard.press("j")
    expect(page.locator("#m-34")).to_have_class(has_class("selected"))
    expect(page.locator("#m-33")).not_to_have_class(has_class("selected"))
    assert page.url.endswith("#m-34")
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(page.locator("#m-33")).to_have_class(has_class("selected"))
    assert in_viewport(page, page.locator("#m-33"))
    # Covered #12 selected by j/k: the summary is its counterpart.
    box.fill("13")
    box.press("Enter")
    # The box hands the focus to #13 once the form's submit event has run: only then is "k" a move.
    expect(page.locator("#m-13")).to_be_focused()
    page.keyboard.press("k")
    expect(page).to_have_url(re.compile(r"#m-12$"))
    expect(page.locator("#input-summary")).to_have_class(has_class("counterpart"))
    box.fill("")
    box.press("j")  # typed into the box, not a move
    assert page.url.endswith("#m-12")
    shot(page, "navigate-j-k")

    # Without the script's help (a message not on the page) the box loads ?seq=N.
    assert not page.js_errors


def test_go_to_box_works_without_script(live_server, login, browser, users, project, shot):
    long_session(project)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    try:
        login(page, "admin")
        page.goto(session_url(live_server.url, KEY))
        page.get_by_label("Go to #").fill("7")
        with page.expect_navigation():
            page.locator("form.go-to").get_by_role("button", name="Go").click()
        assert "seq=7" in page.url
        expect(page.locator("#m-7")).to_have_class(has_class("target"))
    finally:
        context.close()


def test_phone_width_stacks_and_the_badge_still_works(live_server, login, browser, users, project, shot):
    long_session(project)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        login(page, "admin")
        page.goto(session_url(live_server.url, KEY) + "?seq=12")
        # The message asked for is on screen: the model input, stacked in its tab, does not pull the page.
        assert in_viewport(page, page.locator("#m-12"))
        page.locator("#m-14 .text").first.click()
        assert in_viewport(page, page.locator("#m-14"))
        shot(page, "navigate-phone-raw")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        page.locator("#m-12").get_by_role("link", name="covered by checkpoint 1").click()
        summary = page.locator("#input-summary")
        expect(summary).to_be_visible()
        assert in_viewport(page, summary)
        expect(page.get_by_role("tab", name=re.compile("Model input"))).to_have_attribute("aria-selected", "true")
        shot(page, "navigate-phone-summary")
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_session_page_at_1440(live_server, login, browser, users, project, shot, scheme):
    """The toolbar with the go-to box, the rail's nav and the model input side by side with the raw log."""
    long_session(project)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        login(page, "admin")
        page.goto(session_url(live_server.url, KEY))
        page.evaluate("window.scrollTo(0, 0)")
        expect(page.get_by_label("Go to #")).to_be_visible()
        expect(page.locator(".rail-nav")).to_be_visible()
        raw, rail = page.locator("#raw-log-column").bounding_box(), page.locator("#side-rail").bounding_box()
        assert rail["x"] > raw["x"] + raw["width"] - 1, "side by side"
        shot(page, f"navigate-page-top-1440-{scheme}")
        page.locator(".rail-nav").get_by_role("link", name="Event history").click()
        shot(page, f"navigate-events-1440-{scheme}")
    finally:
        context.close()


def test_j_and_k_load_the_next_window_of_the_raw_log(live_server, login, page, project):
    """Past the last loaded message, j loads the later window and moves into it (k likewise backwards)."""
    append_messages(project, "window-70", [
        {"role": "user" if i % 2 else "assistant", "content": f"Short message {i}."} for i in range(1, 71)
    ], "browser-test")
    login(page, "admin")
    page.goto(session_url(live_server.url, "window-70") + "?seq=1")
    expect(page.locator(".raw-log button.more-later")).to_be_visible()
    last = page.locator(".raw-log .msg[data-seq]").last
    last_seq = int(last.get_attribute("data-seq"))
    assert last_seq < 70
    box = page.get_by_label("Go to #")
    box.fill(str(last_seq))
    box.press("Enter")
    expect(page.locator(f"#m-{last_seq}")).to_have_class(has_class("selected"))
    page.keyboard.press("j")
    expect(page.locator(f"#m-{last_seq + 1}")).to_have_class(has_class("selected"))
    assert page.url.endswith(f"#m-{last_seq + 1}")
    assert not page.js_errors
