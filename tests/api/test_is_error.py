"""A failed tool result (`is_error`, SPEC §1): a field of tool messages only, stored, listed in the raw
log, sent in the `anthropic` format as Anthropic's `tool_result.is_error`, kept by the exports, and
read back from Anthropic-format appends. OpenAI has no such field: its format sends the content alone."""

import json

import pytest

from sessions.models import Message
from tests.api.conftest import assert_error, stored

pytestmark = pytest.mark.django_db

CALL = {"id": "toolu_map", "name": "gate_map", "arguments": '{"gate": 12}'}
FAILED = [
    {"id": "m1", "role": "user", "content": "Where is gate 12?"},
    {"id": "m2", "role": "assistant", "content": None, "tool_calls": [CALL]},
    {"id": "m3", "role": "tool", "tool_call_id": "toolu_map", "content": "map service unavailable", "is_error": True},
    {"id": "m4", "role": "assistant", "content": "The map is down; gate 12 is left after security."},
]


@pytest.fixture
def failed(api):
    response = api.post("/sessions/gate/messages", {"messages": FAILED})
    assert response.status_code == 200
    return "gate"


def test_a_failed_tool_result_is_stored_and_listed_in_the_raw_log(api, failed):
    items = api.get("/sessions/gate/messages").json()["items"]

    assert [m["is_error"] for m in items] == [False, False, True, False]
    assert Message.objects.get(session__key="gate", seq=3).is_error is True
    assert Message.objects.get(session__key="gate", seq=3).attributes == {}


def test_the_anthropic_format_sends_it_on_the_tool_result(api, failed):
    messages = api.get("/sessions/gate/model-input", query={"format": "anthropic"}).json()["messages"]

    assert messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_map",
                                       "content": "map service unavailable", "is_error": True}]


def test_the_openai_format_sends_the_content_alone_and_the_count_is_unchanged(api, failed):
    body = api.get("/sessions/gate/model-input", query={"format": "openai"}).json()

    assert body["messages"][2] == {"role": "tool", "content": "map service unavailable", "tool_call_id": "toolu_map"}
    assert api.post("/tokens", {"messages": body["messages"]}).json()["total"] == body["tokens"]["total"]


def test_the_ctxweb_format_shows_it(api, failed):
    entries = api.get("/sessions/gate/model-input").json()["messages"]

    assert [e.get("is_error", False) for e in entries] == [False, False, True, False]


def test_an_anthropic_format_append_keeps_it(api):
    response = api.post("/sessions/claude/messages", {"format": "anthropic", "messages": [
        {"role": "user", "content": "Where is gate 12?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_map", "name": "gate_map",
                                           "input": {"gate": 12}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_map", "is_error": True,
                                      "content": "map service unavailable"}]},
    ]})

    assert response.status_code == 200
    assert list(Message.objects.filter(session__key="claude").values_list("role", "is_error")) == [
        ("user", False), ("assistant", False), ("tool", True)]
    sent = api.get("/sessions/claude/model-input", query={"format": "anthropic"}).json()["messages"]
    assert sent[-1]["content"][0]["is_error"] is True


def test_the_json_export_keeps_it_and_appends_back(api, failed):
    exported = json.loads(b"".join(api.get("/sessions/gate/export").streaming_content))

    assert [m.get("is_error", False) for m in exported["messages"]] == [False, False, True, False]
    assert api.post("/sessions/gate-copy/messages", {"messages": exported["messages"]}).status_code == 200
    assert Message.objects.get(session__key="gate-copy", seq=3).is_error is True


def test_the_markdown_export_says_the_tool_failed(api, failed):
    markdown = b"".join(api.get("/sessions/gate/export", query={"format": "markdown"}).streaming_content).decode()

    assert "### #3 · tool (result of `toolu_map`; the tool reported an error)" in markdown


@pytest.mark.parametrize("message", [
    {"role": "user", "content": "hi", "is_error": True},
    {"role": "assistant", "content": "hi", "is_error": True},
], ids=["user", "assistant"])
def test_it_refuses_is_error_on_a_message_that_is_not_a_tool_result(api, message):
    before = stored()

    body = assert_error(api.post("/sessions/x/messages", {"messages": [message]}), 422, "field_not_allowed")

    assert body["detail"] == "messages[0]: is_error is only allowed on tool messages"
    assert stored() == before


def test_it_refuses_is_error_that_is_not_a_boolean(api):
    messages = [*FAILED[:2], {**FAILED[2], "is_error": "yes"}]

    assert_error(api.post("/sessions/x/messages", {"messages": messages}), 422)


def test_a_retry_that_changes_is_error_is_a_conflict(api, failed):
    retry = [{**FAILED[2], "is_error": False}]

    body = assert_error(api.post("/sessions/gate/messages", {"messages": retry}), 409, "id_conflict")

    assert body["seq"] == 3
