"""Long messages on the pages: the database cuts a long text to its first TEXT_SHOWN characters and
leaves out long tool calls and attributes, so a page's size and memory do not grow with the messages';
"show all" loads one message whole, access-checked like the session page. The exports stream."""

import json
import tracemalloc

import pytest
from django.http import StreamingHttpResponse
from django.urls import reverse

from sessions.db.message_sizes import FIELD_SHOWN, TEXT_SHOWN
from sessions.ingest.append import append_messages
from sessions.models import Project, Session
from tests.conftest import seeded_for_module

from .conftest import call, session_url
from .dom import parse

BIG = 200_000
COUNT = 30


def long_text(n: int, size: int = BIG) -> str:
    return (f"message {n} begins. " + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:size - 8] + " THE-END"


@pytest.fixture(scope="module")
def stored_big(django_db_setup, django_db_blocker) -> int:
    """30 messages of 200,000 characters; #2 also has long reasoning, tool call arguments and attributes.
    Stored once for the module (committed; each test reads or changes it in its own rolled-back
    transaction): the session's primary key."""
    with seeded_for_module(django_db_blocker):
        project = Project.objects.get_or_create(name="default")[0]
        append_messages(project, "big", [{"role": "user", "content": long_text(1)}], "test")
        append_messages(project, "big", [{
            "role": "assistant", "content": long_text(2), "reasoning": "thinking " * 2_000,
            "tool_calls": [call("call_big", "store_blob", blob="b" * 20_000)],
            "attributes": {"trace": "t" * 20_000, "hidden_in_source_ui": True}}], "test")
        append_messages(project, "big", [{"role": "tool", "tool_call_id": "call_big", "content": "stored"}], "test")
        for n in range(4, COUNT + 1):
            append_messages(project, "big", [{"role": "user" if n % 2 else "assistant", "content": long_text(n)}], "test")
        yield Session.objects.get(project=project, key="big").pk


@pytest.fixture
def big(stored_big, project) -> Session:
    return Session.objects.get(pk=stored_big)


def test_the_session_page_of_big_messages_stays_small(viewer_client, big):
    response = viewer_client.get(session_url(big))

    assert response.status_code == 200
    # 30 messages of 200,000 characters, each in the raw log and in the model input: 12 MB of HTML before.
    assert len(response.content) < 30 * 2 * (TEXT_SHOWN + 3_000)
    doc = parse(response)
    first = doc.one("article", id="m-1")
    assert "message 1 begins." in first.text() and "THE-END" not in first.text()
    assert f"Shown: the first {TEXT_SHOWN} of {BIG} characters of text" in first.text()


def test_the_page_reads_no_whole_long_message_from_the_database(viewer_client, big):
    viewer_client.get(session_url(big))  # warm: templates, URL resolvers
    tracemalloc.start()
    try:
        viewer_client.get(session_url(big))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Whole rows (text and content of each) were 24 MB for this page; cut, well under 6 MB.
    assert peak < 6_000_000


def test_every_cut_message_has_a_show_all_link_to_its_whole_body(viewer_client, big):
    doc = parse(viewer_client.get(session_url(big)))
    links = doc.one(id="raw-items").find_all("a", cls="show-all")

    assert len(links) == len(doc.one(id="raw-items").find_all("article", cls="msg")) - 1  # all but the tool result
    link = links[0]
    assert link.get("href") == link.get("hx-get") == session_url(big, "messages/1/")
    assert link.get("hx-target") == "closest .body" and link.get("hx-swap") == "outerHTML"

    whole = viewer_client.get(link.get("href"))

    assert whole.status_code == 200
    assert long_text(1) in whole.content.decode()
    assert parse(whole).one(cls="body").get("data-seq") == "1"


def test_long_reasoning_tool_calls_and_attributes_are_cut_and_shown_whole_on_demand(viewer_client, big):
    doc = parse(viewer_client.get(session_url(big)))
    second = doc.one("article", id="m-2")
    text = second.text()
    assert f"Reasoning: the first {TEXT_SHOWN} of {len('thinking ' * 2_000)} characters." in text
    assert "Tool call arguments not shown." in text and "Attributes not shown." in text
    assert "b" * 1_000 not in text and "t" * 1_000 not in text
    assert second.find(cls="source-hidden") is not None  # read from the attributes by the database

    whole = parse(viewer_client.get(session_url(big, "messages/2/")))

    assert '"blob": "' + "b" * 20_000 in whole.one("pre", cls="arguments").text().replace("\n", "")
    assert "t" * 20_000 in whole.one("table", cls="attributes").text()
    assert len("thinking " * 2_000) > TEXT_SHOWN and len(json.dumps({"trace": "t" * 20_000})) > FIELD_SHOWN


def test_a_short_message_is_shown_whole_without_a_link(viewer_client, story):
    doc = parse(viewer_client.get(story.url()))

    assert doc.find("a", cls="show-all") is None
    assert "Let me check." in doc.one("article", id=f"m-{story.call}").text()


def test_show_all_is_access_checked_like_the_session_page(outsider_client, anonymous_client, viewer_client, big):
    url = session_url(big, "messages/1/")

    assert outsider_client.get(url).status_code == 404
    assert anonymous_client.get(url).status_code == 302
    assert viewer_client.get(session_url(big, "messages/999/")).status_code == 404
    assert viewer_client.post(url).status_code == 405


def test_the_input_column_and_the_live_fragment_cut_long_texts_too(viewer_client, big, project):
    column = parse(viewer_client.get(session_url(big, "input/")))
    assert column.find_all("a", cls="show-all")
    assert "THE-END" not in column.text()
    append_messages(project, "big", [{"role": "user", "content": long_text(99)}], "test")

    live = viewer_client.get(session_url(big, "live/", after=COUNT))

    assert "message 99 begins." in live.content.decode() and "THE-END" not in live.content.decode()
    assert len(live.content) < (COUNT + 2) * (TEXT_SHOWN + 3_000)  # the new message and the model input, cut


@pytest.mark.parametrize("fmt", ["json", "jsonl", "markdown"])
def test_the_dashboard_exports_stream(viewer_client, big, fmt):
    response = viewer_client.get(reverse("session_export", args=["default", "big", fmt]))

    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse)
    body = b"".join(response.streaming_content).decode()
    assert all(long_text(n) in body.replace("\\n", "\n") for n in (1, COUNT))
