"""Files of OpenAI Responses API input items (a list of items, JSON Lines of items, or a request body with
`input`): recognised automatically without changing how the other formats are recognised, imported by
the same parser as `openai-responses` appends, and rendered back as the same items."""

import json

import pytest

from sessions.context.model_input import build_model_input
from sessions.ingest.importers import parse_transcript
from sessions.ingest.importers.detect import detect, load
from sessions.models import Session
from sessions.wire.openai_responses import to_openai_responses
from tests.importers.conftest import counts, jsonl, stored
from tests.responses_input import responses_input_problems

ITEMS = [
    {"type": "message", "role": "developer", "content": "You are a weather assistant."},
    {"type": "message", "role": "user", "content": "Weather in Lisbon and Porto?"},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Two cities: two calls."}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Lisbon"}'},
    {"type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": '{"city": "Porto"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "24°C, sunny"},
    {"type": "function_call_output", "call_id": "call_2", "output": "19°C, cloudy"},
    {"type": "message", "role": "assistant", "content": "Lisbon: 24°C and sunny. Porto: 19°C and cloudy."},
]


def test_a_list_of_items_is_recognised_and_imported(import_bytes):
    report = import_bytes("agent-run.json", ITEMS)

    assert report.error is None, report.error
    assert (report.format, report.keys) == ("openai-responses", ["agent-run"])
    assert (report.messages, report.tool_calls, report.tool_results) == (6, 2, 2)
    session = Session.objects.get(key="agent-run")
    assert session.instructions == "You are a weather assistant."
    messages = stored(session)
    assert [m.client_id for m in messages] == [f"agent-run:0:{i}" for i in (0, 1, 3, 5, 6, 7)]
    assert messages[2].reasoning == "Two cities: two calls."
    assert session.metadata == {"imported_from": {"file": "agent-run.json", "format": "openai-responses"}}
    # What the model saw, as items: the same items, less the reasoning.
    items = to_openai_responses(build_model_input(session))
    assert items == [item for item in ITEMS if item["type"] != "reasoning"]
    assert responses_input_problems(items) == []


def test_importing_it_again_stores_nothing(import_bytes, project):
    import_bytes("agent-run.json", ITEMS)
    before = counts(project)

    again = import_bytes("agent-run.json", ITEMS)

    assert (again.messages, again.duplicates) == (0, 6)
    assert counts(project) == before


def test_json_lines_of_items_are_recognised(import_bytes):
    report = import_bytes("agent-run.jsonl", jsonl(*ITEMS))
    assert (report.error, report.format, report.messages) == (None, "openai-responses", 6)


def test_a_request_body_gives_its_instructions_and_its_other_fields_as_metadata(import_bytes):
    body = {"model": "gpt-5", "instructions": "Be brief.", "input": ITEMS[1:], "temperature": 0.2}

    report = import_bytes("request.json", body)

    assert (report.error, report.format) == (None, "openai-responses")
    session = Session.objects.get(key="request")
    assert session.instructions == "Be brief."
    assert session.metadata["model"] == "gpt-5" and session.metadata["temperature"] == 0.2
    assert stored(session)[0].role == "system" and stored(session)[0].content == "Be brief."
    assert to_openai_responses(build_model_input(session))[0] == {"type": "message", "role": "developer",
                                                                   "content": "Be brief."}


def test_a_request_body_with_text_input_is_one_user_message(import_bytes):
    report = import_bytes("hello.json", {"model": "gpt-5", "input": "Hello!"})
    assert (report.error, report.messages) == (None, 1)
    assert stored(Session.objects.get(key="hello"))[0].content == "Hello!"


def test_an_item_ctxweb_cannot_show_fails_the_file_naming_the_item(import_bytes, project):
    report = import_bytes("search.json", [*ITEMS[:2], {"type": "web_search_call", "id": "ws_1", "status": "completed"}])

    assert report.error is not None
    assert "item 2" in report.error and "'web_search_call' is not supported" in report.error
    assert counts(project)["messages"] == 0


@pytest.mark.parametrize(("value", "fmt"), [
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}], "openai"),
    ([{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}], "openai"),
    ({"messages": [{"role": "user", "content": "Hi"}]}, "openai"),
    ([{"messages": [{"role": "user", "content": "Hi"}], "type": "message"}], "openai"),
    ({"system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]}, "anthropic"),
    ([{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "Hi"}}], "claude-code"),
    ([{"role": "user", "content": "Hi"}, {"type": "function_call_output", "call_id": "c", "output": "x"}],
     "openai-responses"),
])
def test_recognition_of_the_other_formats_is_unchanged(value, fmt):
    assert detect(*load("file.json", json.dumps(value).encode())) == fmt


def test_the_format_can_be_forced(project):
    parsed = parse_transcript("items.json", json.dumps(ITEMS).encode(), fmt="openai-responses")
    assert parsed.format == "openai-responses" and len(parsed.sessions[0].messages) == 6
