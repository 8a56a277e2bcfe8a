"""Content from applications never runs as script or HTML in the dashboard: a payload in
every field a page shows is rendered as text, and dashboard pages carry a Content-Security-Policy
that allows scripts only from our own origin."""

import json

import pytest
from django.urls import reverse

from sessions.context.compaction_runs import compact
from sessions.ingest.append import append_messages
from sessions.ingest.next_request import build_request
from sessions.ingest.session_store import update_session
from sessions.models import Session
from sessions.store.notes import add_note

from .conftest import session_url
from .dom import parse

PAYLOAD = "<img src=x onerror=alert(1)><script>alert(2)</script>"
IMAGE_URL = 'https://example.com/a.png?x="><script>alert(3)</script>'


@pytest.fixture
def hostile(project, viewer_user):
    """A session whose every displayed field carries the payload."""
    key = "hostile"
    update_session(project, key, {
        "title": PAYLOAD,
        "metadata": {"note": PAYLOAD},
        "instructions": "Instructions " + PAYLOAD,
        "compaction": {"max_tokens": 100_000, "keep_recent_tokens": 50, "auto": False},
    }, "test")
    append_messages(project, key, [
        {"role": "user", "content": "old question " + PAYLOAD + " " + "word " * 80, "name": PAYLOAD},
        {"role": "assistant", "content": "old answer " + PAYLOAD + " " + "word " * 80},
        {"role": "user", "content": "next question"},
    ], "test")
    session = Session.objects.get(project=project, key=key)
    outcome = compact(session, force=True, keep_recent_tokens=1, summary="Summary " + PAYLOAD)
    assert outcome.status == "completed", outcome.reason
    append_messages(project, key, [
        {"role": "user", "content": PAYLOAD, "attributes": {PAYLOAD: PAYLOAD, "trace": PAYLOAD}},
        {"role": "assistant", "content": "ok " + PAYLOAD, "reasoning": PAYLOAD, "tool_calls": [
            {"id": "call_x", "name": "lookup", "arguments": json.dumps({"q": PAYLOAD})},
            {"id": "call_y", "name": PAYLOAD, "arguments": PAYLOAD},
        ]},
        {"role": "tool", "tool_call_id": "call_x", "name": PAYLOAD, "content": PAYLOAD},
        {"role": "tool", "tool_call_id": "call_y", "content": [{"type": "text", "text": PAYLOAD}]},
        {"role": "user", "content": [
            {"type": "text", "text": "look " + PAYLOAD},
            {"type": "image", "url": IMAGE_URL, "media_type": "image/png", "width": 10, "height": 10}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_z", "name": "x", "arguments": PAYLOAD}]},
        {"role": "user", "content": "and " + PAYLOAD},
        {"role": "assistant", "content": "final " + PAYLOAD},
    ], "test")
    session.refresh_from_db()
    add_note(session, viewer_user, "note " + PAYLOAD, 3)
    add_note(session, viewer_user, "session note " + PAYLOAD)
    event = build_request(project, key, messages=[{"role": "user", "content": PAYLOAD, "persist": False}]).event
    return {"session": session, "checkpoint": outcome.checkpoint, "request": event}


def assert_inert(response, *, expect_payload=True):
    """Nothing from the payload became markup: no event-handler attributes, no inline scripts, no
    <img src=x>; and the payload is still shown, as text."""
    assert response.status_code == 200, response.status_code
    doc = parse(response)
    for element in doc.iter():
        handlers = [name for name in element.attrs if name.startswith("on")]
        assert not handlers, f"{element}: event handler attribute {handlers}"
        if element.tag == "script":
            assert (element.get("src") or "").startswith("/static/"), f"inline or foreign script {element}"
        if element.tag == "img":
            assert element.get("src") != "x", f"injected image {element}"
        for name, value in element.attrs.items():
            assert not value.strip().lower().startswith("javascript:"), f"{element}: {name}"
    text = response.content.decode()
    assert PAYLOAD not in text
    assert "<script>alert(" not in text
    if expect_payload:
        assert PAYLOAD in doc.text(), "the payload should be shown as text"
    return doc


def test_the_session_page_shows_every_field_escaped(viewer_client, hostile):
    doc = assert_inert(viewer_client.get(session_url(hostile["session"])))
    page_text = doc.text()
    assert page_text.count(PAYLOAD) >= 10
    assert doc.one("h1").text() == PAYLOAD
    attributes = doc.one("table", cls="attributes")
    cells = {tr.one("th").text(): tr.one("td").text() for tr in attributes.find_all("tr")}
    assert cells == {PAYLOAD: PAYLOAD, "trace": PAYLOAD}
    arguments = [pre.text() for pre in doc.one("section", cls="raw-log").find_all("pre", cls="arguments")]
    assert any(PAYLOAD in a for a in arguments)
    assert PAYLOAD in arguments  # a raw (non-JSON) arguments string, shown as it is
    img = doc.one("section", cls="raw-log").one("img", cls="thumb")
    assert img.get("src") == IMAGE_URL


def test_the_session_page_with_a_permalink_and_as_of_stays_escaped(viewer_client, hostile):
    assert_inert(viewer_client.get(session_url(hostile["session"], seq=3, as_of=5)))


def test_fragments_stay_escaped(viewer_client, hostile, project):
    session = hostile["session"]
    assert_inert(viewer_client.get(session_url(session, "log/", before=8)))
    assert_inert(viewer_client.get(session_url(session, "log/", after=0)))
    assert_inert(viewer_client.get(session_url(session, "input/")))
    assert_inert(viewer_client.get(session_url(session, "events/", before=10**9)))
    assert_inert(viewer_client.get(session_url(session, "chart/")), expect_payload=False)
    append_messages(project, "hostile", [{"role": "user", "content": "new " + PAYLOAD}], "test")
    assert_inert(viewer_client.get(session_url(session, "live/", after=session.message_count)))


def test_the_sessions_list_shows_the_title_escaped(viewer_client, hostile):
    assert_inert(viewer_client.get(reverse("sessions")))
    assert_inert(viewer_client.get(reverse("sessions"), {"q": "onerror"}))
    assert_inert(viewer_client.get(reverse("sessions"), {"q": PAYLOAD}))
    assert_inert(viewer_client.get(reverse("sessions"), {"q": "onerror"}, HTTP_HX_REQUEST="true",
                                   HTTP_HX_TARGET="session-rows"))


def test_a_hostile_value_in_the_list_filters_is_escaped(viewer_client, hostile):
    response = viewer_client.get(reverse("sessions"), {"tag": PAYLOAD, "from": PAYLOAD, "project": PAYLOAD})
    assert_inert(response, expect_payload=False)


def test_search_snippets_are_escaped(viewer_client, hostile):
    doc = assert_inert(viewer_client.get(reverse("search"), {"q": "onerror alert"}))
    snippets = doc.one(id="search-results").find_all(cls="snippet")
    assert snippets
    for snippet in snippets:
        assert snippet.find("script") is None and snippet.find("img") is None
        assert {e.tag for e in snippet.iter()} <= {"mark"}
    assert_inert(viewer_client.get(reverse("search"), {"q": PAYLOAD}))
    assert_inert(viewer_client.get(reverse("search"), {"q": "onerror"}, HTTP_HX_REQUEST="true",
                                   HTTP_HX_TARGET="search-results"))


def test_the_checkpoint_diff_is_escaped(viewer_client, hostile):
    session = hostile["session"]
    url = reverse("checkpoint_diff", args=["default", session.key, hostile["checkpoint"].pk])
    doc = assert_inert(viewer_client.get(url))
    assert ("Summary " + PAYLOAD) in doc.one("section", cls="diff-summary").text()


def test_the_request_view_is_escaped(viewer_client, hostile):
    session = hostile["session"]
    assert_inert(viewer_client.get(reverse("request_view", args=["default", session.key, hostile["request"].pk])))


def test_the_markdown_export_keeps_the_text_as_it_is(viewer_client, hostile):
    response = viewer_client.get(reverse("session_export", args=["default", "hostile", "markdown"]))
    assert response["Content-Type"].startswith("text/markdown")
    assert response.get("Content-Disposition", "").startswith("attachment")


def test_an_api_key_name_is_escaped_on_the_keys_page(admin_client, project):
    response = admin_client.post(reverse("api_keys"), {"project": "default", "name": PAYLOAD}, follow=True)
    assert_inert(response)
    assert_inert(admin_client.get(reverse("api_keys")))


def test_a_hostile_username_in_the_members_form_is_escaped(admin_client, project):
    response = admin_client.post(reverse("members", args=["default"]), {"username": PAYLOAD, "role": "viewer"},
                                 follow=True)
    assert_inert(response)


# --- Content-Security-Policy ---------------------------------------------------------------------


def directives(response) -> dict[str, list[str]]:
    policy = response.get("Content-Security-Policy")
    assert policy, "no Content-Security-Policy header"
    parsed = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            parsed[words[0]] = words[1:]
    return parsed


def test_dashboard_pages_carry_a_csp_that_allows_scripts_only_from_self(viewer_client, admin_client, hostile):
    session = hostile["session"]
    for client, url in [
        (viewer_client, reverse("sessions")),
        (viewer_client, session_url(session)),
        (viewer_client, session_url(session, "log/", before=5)),
        (viewer_client, session_url(session, "chart/")),
        (viewer_client, reverse("search") + "?q=alert"),
        (viewer_client, reverse("checkpoint_diff", args=["default", session.key, hostile["checkpoint"].pk])),
        (viewer_client, reverse("request_view", args=["default", session.key, hostile["request"].pk])),
        (admin_client, reverse("api_keys")),
        (admin_client, reverse("members", args=["default"])),
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
        csp = directives(response)
        script_src = csp.get("script-src", csp.get("default-src"))
        assert script_src == ["'self'"], (url, script_src)
        assert csp.get("object-src") == ["'none'"], url
        assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
        assert csp.get("style-src") == ["'self'"], url  # no inline style either


def test_the_login_page_and_error_pages_also_carry_the_csp(anonymous_client, viewer_client):
    assert directives(anonymous_client.get("/login/"))["script-src"] == ["'self'"]
    assert directives(viewer_client.get("/p/default/s/nope/"))["script-src"] == ["'self'"]


def test_pages_have_no_inline_scripts_for_the_csp_to_block(viewer_client, hostile):
    for url in (reverse("sessions"), session_url(hostile["session"]), reverse("search")):
        for script in parse(viewer_client.get(url)).find_all("script"):
            assert script.get("src"), url
