"""Issue 17, support staff's journeys in a real browser: a note found through search and the words
marked where the hit leads, the sessions list searched by tag, two sessions tagged at once, the tags
and notes in the JSON download, and a message's link copied to the clipboard."""

import json

import pytest
from playwright.sync_api import expect

from sessions.ingest.append import append_messages

from .data import support_session
from .helpers import has_class
from .stored_data import stored

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHRASE = "the courier left my suitcase at the wrong terminal"
NOTE = "Customer prefers the wombat courier <b>next time</b>"
SEQ = 29


@pytest.fixture
def sessions(project):
    return stored(project, support_sessions)  # built once, then copied back


def support_sessions(project):
    ticket = support_session(project, PHRASE, at_seq=SEQ, count=150)
    append_messages(project, "support-ticket-10", [
        {"role": "user", "content": "My suitcase is still missing."},
        {"role": "assistant", "content": "I have opened a trace for it."},
    ], "test")
    append_messages(project, "unrelated", [{"role": "user", "content": "What is the weather?"}], "test")
    return ticket


def test_a_note_is_found_through_search_and_its_words_are_marked_where_the_hit_leads(live_server, login, page, sessions, shot):
    login(page, "viewer")
    page.goto(f"{live_server.url}{sessions.get_absolute_url()}?seq={SEQ}#m-{SEQ}")
    form = page.locator(f"article#m-{SEQ} .note-form")
    form.locator("input[name=text]").fill(NOTE)
    with page.expect_navigation():
        form.get_by_role("button", name="Add note").click()

    page.goto(live_server.url + "/search/")
    page.locator("input[name=q]").press_sequentially("wombat courier", delay=10)
    expect(page.locator("#search-results")).to_contain_text("for “wombat courier”")
    group = page.locator(".hit-session").first
    expect(group.locator("h2 a.key")).to_have_text(sessions.key)
    note_hit = group.locator(".note-hit")
    expect(note_hit).to_have_count(1)
    expect(note_hit.locator("mark")).to_have_text("wombat courier")
    expect(note_hit.locator(".snippet")).to_contain_text("<b>next time</b>")  # shown as text, not markup
    shot(page, "support-search-note-hit", full_page=True)

    with page.expect_navigation():
        note_hit.locator("a.key").click()
    assert f"seq={SEQ}" in page.url and "q=wombat" in page.url
    message = page.locator(f"article#m-{SEQ}")
    expect(message).to_have_class(has_class("target"))
    expect(message.locator(".notes .text mark.search-term")).to_have_text("wombat courier")
    expect(message.locator(".body mark.search-term")).to_have_text(["courier"])  # the word of the query in the message
    expect(message.locator(".notes .text b")).to_have_count(0)
    expect(page.locator("mark.search-term")).to_have_count(2)  # only in the message the hit is about
    shot(page, "support-session-marked", full_page=False)
    assert not page.js_errors


def test_two_sessions_are_tagged_at_once_then_found_by_the_tag_and_downloaded_with_it(live_server, login, page, sessions, shot, tmp_path):
    login(page, "viewer")
    page.goto(live_server.url + "/")
    page.get_by_label(f"select {sessions.key}").check()
    page.get_by_label("select support-ticket-10").check()
    page.get_by_label("Tag the ticked sessions").fill("escalated")
    with page.expect_navigation():
        page.get_by_role("button", name="Add tag").click()
    expect(page.locator(".flash")).to_contain_text("“escalated” added to 2 sessions")
    shot(page, "support-bulk-tagged", full_page=False)

    page.get_by_label("Search sessions").press_sequentially("escalated", delay=10)
    expect(page.locator("#session-rows a.key")).to_have_count(2)
    expect(page.locator("#session-rows")).not_to_contain_text("unrelated")
    shot(page, "support-list-by-tag", full_page=False)

    page.goto(f"{live_server.url}{sessions.get_absolute_url()}?seq={SEQ}")
    form = page.locator(f"article#m-{SEQ} .note-form")
    form.locator("input[name=text]").fill("Refund approved")
    with page.expect_navigation():
        form.get_by_role("button", name="Add note").click()
    with page.expect_download() as download:
        page.get_by_role("link", name="JSON", exact=True).click()
    path = tmp_path / "export.json"
    download.value.save_as(path)
    exported = json.loads(path.read_text())
    assert exported["tags"] == ["escalated"]
    assert [(n["seq"], n["author"], n["text"]) for n in exported["notes"]] == [(SEQ, "viewer", "Refund approved")]
    assert not page.js_errors


def test_copy_link_puts_the_messages_address_on_the_clipboard_and_says_copied(live_server, login, page, sessions, shot):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    login(page, "viewer")
    page.goto(f"{live_server.url}{sessions.get_absolute_url()}?seq={SEQ}")
    header = page.locator(f"article#m-{SEQ} header")
    header.get_by_role("link", name=f"copy link to message {SEQ}").click()

    expect(header.get_by_role("status")).to_have_text("copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == f"{live_server.url}{sessions.get_absolute_url()}?seq={SEQ}#m-{SEQ}"
    assert f"seq={SEQ}" in page.url and "#" not in page.url  # the page did not follow the link
    shot(page, "support-copy-link", full_page=False)
    assert not page.js_errors



@pytest.mark.parametrize("width,height,scheme", [(1440, 900, "dark"), (390, 844, "light"), (390, 844, "dark")])
def test_the_support_controls_fit_a_phone_and_the_dark_scheme(live_server, browser, users, sessions, shot, width,
                                                              height, scheme):
    from sessions.store.notes import add_note, set_tags

    from .conftest import sign_in

    add_note(sessions, users["viewer"], NOTE, seq=SEQ)
    set_tags(sessions, users["viewer"], ["escalated"])
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme,
                                  is_mobile=width < 700, has_touch=width < 700)
    page = context.new_page()
    try:
        sign_in(page, live_server.url, "viewer")
        name = f"{width}-{scheme}"
        for label, url in [
            ("list", "/?q=escalated"),
            ("search", "/search/?q=wombat+courier"),
            ("session", f"{sessions.get_absolute_url()}?seq={SEQ}&q=wombat+courier#m-{SEQ}"),
        ]:
            page.goto(live_server.url + url)
            if label == "session":
                expect(page.locator(f"article#m-{SEQ} mark.search-term").first).to_be_visible()
            wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
            assert not wide, f"{label} scrolls sideways at {width}px"
            shot(page, f"support-{label}-{name}")
    finally:
        context.close()


def test_marking_the_words_of_a_hostile_query_runs_nothing(live_server, login, page, project):
    hostile = '<img src=x onerror="window.__pwned=1"> "><script>window.__pwned=2</script> (a+)+$ [\\'
    append_messages(project, "hostile", [{"role": "user", "content": f"Quoted back: {hostile} img onerror script"}], "test")
    login(page, "viewer")
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    from urllib.parse import quote

    page.goto(f"{live_server.url}/p/default/s/hostile/?seq=1&q={quote(hostile)}#m-1")
    message = page.locator("article#m-1")
    expect(message.locator("mark.search-term").first).to_be_visible()
    expect(message.locator(".body img, .body script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None and not dialogs and not page.js_errors
