"""GET /api/v1/sessions/{key}/export?format=json|jsonl|markdown: one session, lossless JSON
that appends back unchanged, JSON Lines, or a Markdown transcript."""

import base64
import json
import re

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext

from sessions.context.exports import export_json, iter_messages
from sessions.models import Message, Session
from tests.api.conftest import assert_error, stored

pytestmark = pytest.mark.django_db

PIXEL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").decode()
RAW_FIELDS = ("seq", "id", "role", "content", "reasoning", "tool_calls", "tool_call_id", "name", "attributes",
              "include_in_messages", "created_at", "tokens", "reasoning_tokens")
DB_FIELDS = ("seq", "client_id", "role", "content", "text", "reasoning", "tool_calls", "call_ids", "tool_call_id",
             "call_seq", "name", "attributes", "include_in_messages", "created_at", "tokens", "tool_call_tokens",
             "reasoning_tokens", "has_content", "digest")


@pytest.fixture
def trip(api):
    """Session 'trip': instructions, a client-dated history, a named user, reasoning, parallel tool calls and
    their results, an image (URL and data: URL), attributes, a hidden message and messages without ids."""
    api.put("/sessions/trip", {"title": "Trip: Lisbon & Porto", "metadata": {"customer": 7},
                               "instructions": "You are a travel assistant. Use the tools.",
                               "compaction": {"auto": False}})
    response = api.post("/sessions/trip/messages", {"messages": [
        {"id": "u1", "role": "user", "name": "maria", "content": "Plan a day in Lisbon and Porto.",
         "attributes": {"trace": "abc-1", "nested": {"n": [1, 2.5, None, True]}},
         "created_at": "2024-05-01T09:00:00.123456+00:00"},
        {"role": "assistant", "content": None, "reasoning": "Check the weather in both cities first.",
         "tool_calls": [{"id": "call_l", "name": "get_weather", "arguments": {"city": "Lisbon"}},
                        {"id": "call_p", "name": "get_weather", "arguments": "{\"city\": \"Porto\"}"}]},
        {"role": "tool", "tool_call_id": "call_l", "name": "get_weather", "content": "Lisbon: 24°C, sunny"},
        {"role": "tool", "tool_call_id": "call_p", "content": [{"type": "text", "text": "Porto: 19°C, cloud"}]},
        {"role": "assistant", "content": "Lisbon will be sunny; bring a jacket for Porto.",
         "attributes": {"model": "gpt-x"}},
        {"id": "oops", "role": "user", "content": "ignore this, wrong window", "include_in_messages": False},
        {"role": "system", "content": "Stored system note: user prefers trains."},
        {"role": "user", "content": [
            {"type": "text", "text": "What about this view?"},
            {"type": "image", "url": "https://example.com/view.jpg", "width": 1024, "height": 768, "detail": "high"},
            {"type": "image", "url": PIXEL, "media_type": "image/png"}]},
        {"role": "agent", "content": "Continue: the user's train leaves at 15:00."},
        {"role": "assistant", "content": "A lovely view of the Tagus."},
    ]})
    assert response.status_code == 200
    return "trip"


def raw_log_items(api, key):
    items = api.get(f"/sessions/{key}/messages", query={"limit": 500}).json()["items"]
    return [{field: m[field] for field in RAW_FIELDS} for m in items]


def db_rows(key):
    return list(Message.objects.filter(session__key=key).order_by("seq").values(*DB_FIELDS))


def model_input(api, key, fmt):
    body = api.get(f"/sessions/{key}/model-input", query={"format": fmt}).json()
    return {k: v for k, v in body.items() if k not in ("session", "checkpoint")}


def exported(api, key) -> dict:
    """The JSON export, read as a client reads the stream."""
    return json.loads(b"".join(api.get(f"/sessions/{key}/export").streaming_content))


def import_export(api, export, key):
    api.put(f"/sessions/{key}", {"instructions": export["session"]["instructions"]})
    response = api.post(f"/sessions/{key}/messages", {"messages": export["messages"]})
    assert response.status_code == 200, response.content
    assert all(m["stored"] for m in response.json()["messages"])


def test_the_json_export_holds_the_session_its_messages_and_its_checkpoints(api, trip):
    response = api.get("/sessions/trip/export")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert 'filename="trip.json"' in response["Content-Disposition"]
    export = json.loads(b"".join(response.streaming_content))
    assert (export["format"], export["version"]) == ("ctxweb-session", 1)
    assert export["session"]["key"] == "trip"
    assert export["session"]["title"] == "Trip: Lisbon & Porto"
    assert export["session"]["metadata"] == {"customer": 7}
    assert export["session"]["instructions"] == "You are a travel assistant. Use the tools."
    assert export["session"]["compaction"] == {"auto": False}
    assert len(export["messages"]) == 10
    assert export["messages"][0] == {
        "id": "u1", "role": "user", "name": "maria", "content": "Plan a day in Lisbon and Porto.",
        "attributes": {"trace": "abc-1", "nested": {"n": [1, 2.5, None, True]}},
        "created_at": "2024-05-01T09:00:00.123456+00:00"}
    assert export["messages"][5]["include_in_messages"] is False
    assert export["checkpoints"] == []


def test_the_jsonl_export_is_one_json_object_per_line(api, trip):
    api.post("/sessions/trip/compact", {"force": True, "keep_recent_tokens": 1, "summary": "A trip was planned."})

    response = api.get("/sessions/trip/export", query={"format": "jsonl"})

    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = b"".join(response.streaming_content).decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records] == ["session"] + ["message"] * 10 + ["checkpoint"]
    assert records[0]["key"] == "trip"
    assert [r["seq"] for r in records[1:11]] == list(range(1, 11))
    assert records[1]["id"] == "u1"
    assert records[11]["summary"] == "A trip was planned."
    assert records[11]["last_seq"] == 7


def test_the_markdown_export_is_a_readable_transcript(api, trip):
    api.post("/sessions/trip/compact", {"force": True, "keep_recent_tokens": 1, "summary": "A trip was planned."})

    response = api.get("/sessions/trip/export", query={"format": "markdown"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    text = b"".join(response.streaming_content).decode()
    assert text.startswith("# Trip: Lisbon & Porto\n")
    assert "You are a travel assistant. Use the tools." in text
    assert "### #1 · user · maria" in text
    assert "Plan a day in Lisbon and Porto." in text
    assert "**Tool call** `get_weather` (`call_l`)" in text
    assert '"city": "Lisbon"' in text
    assert "### #6 · user (hidden from the model)" in text
    assert "result of `call_p`" in text
    assert "![image, 1024×768](https://example.com/view.jpg)" in text
    assert "[image: image/png]" in text
    assert "Check the weather in both cities first." in text
    assert "covers messages #1–#7" in text and "A trip was planned." in text


def test_an_exported_session_appends_back_to_an_identical_raw_log_and_model_input(api, trip):
    export = exported(api, "trip")

    import_export(api, export, "trip-copy")

    assert raw_log_items(api, "trip-copy") == raw_log_items(api, "trip")
    assert db_rows("trip-copy") == db_rows("trip")
    for fmt in ("ctxweb", "openai", "anthropic"):
        assert model_input(api, "trip-copy", fmt) == model_input(api, "trip", fmt), fmt
    copy, original = api.get("/sessions/trip-copy").json(), api.get("/sessions/trip").json()
    for figure in ("message_count", "raw_tokens", "model_input_tokens", "instructions_tokens"):
        assert copy[figure] == original[figure], figure


def test_a_compacted_session_appends_back_to_an_identical_raw_log(api, trip):
    api.post("/sessions/trip/compact", {"force": True, "keep_recent_tokens": 1, "summary": "A trip was planned."})
    export = exported(api, "trip")
    assert len(export["checkpoints"]) == 1

    import_export(api, export, "trip-copy")

    assert raw_log_items(api, "trip-copy") == raw_log_items(api, "trip")
    assert db_rows("trip-copy") == db_rows("trip")


def test_appending_an_export_twice_stores_nothing_twice(api, trip):
    export = exported(api, "trip")
    import_export(api, export, "trip-copy")
    before = stored()

    response = api.post("/sessions/trip-copy/messages", {"messages": export["messages"]})

    assert response.status_code == 200
    assert all(m["duplicate"] for m in response.json()["messages"])
    assert stored() == before


def test_the_download_name_is_safe_for_any_session_key(api, append):
    append("support:ticket@9", [{"role": "user", "content": "hi"}])

    response = api.get("/sessions/support:ticket@9/export", query={"format": "markdown"})

    assert 'filename="support_ticket_9.md"' in response["Content-Disposition"]


def test_it_rejects_an_unknown_format_with_422(api, trip):
    assert_error(api.get("/sessions/trip/export", query={"format": "csv"}), 422, "invalid_request")


def test_it_answers_404_for_an_unknown_session(api, trip):
    assert_error(api.get("/sessions/nope/export"), 404, "session_not_found")


@pytest.mark.parametrize("fmt", ["json", "jsonl", "markdown"])
def test_another_projects_key_gets_404_and_no_transcript(other_api, trip, fmt):
    body = assert_error(other_api.get("/sessions/trip/export", query={"format": fmt}), 404, "session_not_found")

    assert set(body) <= {"detail", "code"}


@pytest.mark.parametrize("key", ["bad%20key", "k" * 201])
def test_it_rejects_an_invalid_session_key_with_422(api, key):
    assert_error(api.get(f"/sessions/{key}/export"), 422, "invalid_session_key")


def test_it_rejects_a_request_without_a_valid_key_with_401(api, trip, bad_credentials):
    kwargs, code = bad_credentials

    body = assert_error(api.get("/sessions/trip/export", **kwargs), 401, code)

    assert "messages" not in body


@pytest.mark.parametrize("fmt", ["json", "jsonl", "markdown"])
def test_every_format_is_streamed(api, trip, fmt):
    response = api.get("/sessions/trip/export", query={"format": fmt})

    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    chunks = response.streaming_content
    assert iter(chunks) is chunks  # an iterator, not a body built before the response
    first, rest = next(chunks), b"".join(chunks)
    assert first and rest  # written in parts as it is read


def test_the_streamed_json_is_byte_for_byte_the_json_of_the_whole_export(api, trip):
    api.post("/sessions/trip/compact", {"force": True, "keep_recent_tokens": 1, "summary": "A trip: ünïcode ✓ \"quoted\"."})
    session = Session.objects.get(key="trip")

    streamed = b"".join(api.get("/sessions/trip/export").streaming_content)

    assert streamed == json.dumps(export_json(session), ensure_ascii=False).encode()
    assert json.loads(streamed)["checkpoints"][0]["summary"] == 'A trip: ünïcode ✓ "quoted".'


def test_the_json_of_an_empty_session_is_the_same_streamed(api):
    api.put("/sessions/empty", {"title": "nothing yet"})

    streamed = b"".join(api.get("/sessions/empty/export").streaming_content)

    assert streamed == json.dumps(export_json(Session.objects.get(key="empty")), ensure_ascii=False).encode()
    assert json.loads(streamed)["messages"] == []


def test_messages_are_read_in_pages_bounded_by_their_size(api):
    api.post("/sessions/big/messages", {"messages": [
        {"role": "user", "content": f"{n} " + "word " * 10_000} for n in range(1, 7)]})
    session = Session.objects.get(key="big")

    with CaptureQueriesContext(connection) as queries:
        seqs = [m.seq for m in iter_messages(session, batch_chars=120_000)]
    with CaptureQueriesContext(connection) as one_page:
        assert [m.seq for m in iter_messages(session)] == seqs

    with CaptureQueriesContext(connection) as pairs:
        assert [m.seq for m in iter_messages(session, batch=4, batch_chars=250_000)] == seqs

    assert seqs == [1, 2, 3, 4, 5, 6]
    # Each message holds about 100,000 characters (its content and its text): one message per page.
    assert len(full_row_reads(queries)) == 6
    assert len(full_row_reads(one_page)) == 1
    # Two messages a page, and the sizes of at most 4 messages read at a time: 1-2, 3-4, then 5-6.
    assert len(full_row_reads(pairs)) == 3


def full_row_reads(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if '"reasoning"' in q["sql"] and "LENGTH" not in q["sql"].upper()]


def fenced_blocks(markdown: str) -> list[str]:
    """The contents of the backtick-fenced code blocks of a Markdown text, closed as CommonMark closes
    them: by the first line of at least as many backticks as the opening fence, indented up to three
    spaces and followed by nothing but spaces."""
    blocks, lines, n = [], markdown.split("\n"), 0
    while n < len(lines):
        opening = re.match(r" {0,3}(`{3,})[^`]*$", lines[n])
        n += 1
        if not opening:
            continue
        closing = re.compile(r" {0,3}" + "`" * len(opening.group(1)) + r"`* *$")
        start = n
        while n < len(lines) and not closing.match(lines[n]):
            n += 1
        blocks.append("\n".join(lines[start:n]))
        n += 1
    return blocks


def test_backticks_in_a_text_cannot_close_its_code_fence_or_span_in_the_markdown_export(api):
    tricky = "before\n   ````   \n# Not a heading\n``````` x\nafter ```"
    api.put("/sessions/fences", {"instructions": tricky})
    api.post("/sessions/fences/messages", {"messages": [
        {"role": "assistant", "content": None, "reasoning": tricky,
         "tool_calls": [{"id": "c`1", "name": "run", "arguments": tricky}]},
        {"role": "tool", "tool_call_id": "c`1", "content": tricky},
    ]})

    response = api.get("/sessions/fences/export", query={"format": "markdown"})

    text = b"".join(response.streaming_content).decode()
    assert fenced_blocks(text) == [tricky] * 4
    assert "**Tool call** `run` (``c`1``)" in text and "result of ``c`1``" in text


def test_an_image_data_url_with_an_upper_case_scheme_is_not_written_into_the_markdown_export(api):
    upper = PIXEL.replace("data:", "DATA:", 1)
    mixed = PIXEL.replace("data:", "DaTa:", 1)
    api.post("/sessions/pics/messages", {"messages": [{"role": "user", "content": [
        {"type": "image", "url": upper, "media_type": "image/png"}, {"type": "image", "url": mixed}]}]})

    text = b"".join(api.get("/sessions/pics/export", query={"format": "markdown"}).streaming_content).decode()

    assert "[image: image/png]" in text and "[image: inline data]" in text
    assert "base64" not in text and "](" not in text


def test_an_image_url_cannot_end_its_markdown_image_early(api):
    url = "https://example.com/a.png) [click](javascript:alert(1)"
    api.post("/sessions/pics/messages", {"messages": [{"role": "user", "content": [{"type": "image", "url": url}]}]})

    text = b"".join(api.get("/sessions/pics/export", query={"format": "markdown"}).streaming_content).decode()

    assert "![image](https://example.com/a.png%29%20%5Bclick%5D%28javascript:alert%281%29)" in text
    assert "[click](" not in text
